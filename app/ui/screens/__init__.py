"""Screens: start-up, chat, and the modal dialogs."""
