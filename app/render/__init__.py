"""Text for people: stored chats as Markdown or HTML, speed tables and bar charts."""
