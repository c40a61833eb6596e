"""LingChatApp: start the model side with its proof on screen, then chat; always shut down."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, SystemCommand
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import Theme
from textual.worker import WorkerFailed

from app.backend.protocol import ChatBackend
from app.core.chat import Sampling
from app.core.errors import (
    BackendError,
    ConfigError,
    ExportError,
    LingChatError,
    ProofFailed,
    StorageError,
)
from app.core.exit_status import ExitStatus, signal_status
from app.core.proof_report import ProofReport
from app.plumbing.crash import crash_line
from app.prefs.presets import PresetFile
from app.prefs.theme import ThemeFile
from app.storage import ChatStore
from app.textsafe import visible
from app.ui.bindings import APP_ACTIONS, CHAT_ACTIONS, action_by_id, keys_for
from app.ui.chat_context import ChatContext
from app.ui.format import proof_text, replay_label, visible_text
from app.ui.recovery import RecoveryFile
from app.ui.reply import ReplyRun
from app.ui.screens.chat import ChatScreen
from app.ui.screens.dialogs import HelpScreen
from app.ui.screens.startup import StartupScreen
from app.ui.terminal import TerminalDriver, TerminalHungUp

LONG_LOAD_S = 60.0
"""A start-up this long earns the `load_tip` (keep the engine loaded for next time)."""


class LingChatApp(App[None], inherit_bindings=False):
    """The ling-chat terminal app around one `ChatBackend` and one `ChatStore`."""

    CSS_PATH = "app.tcss"
    TITLE = "ling-chat"
    BINDINGS = [action.binding() for action in APP_ACTIONS]

    def __init__(
        self,
        backend: ChatBackend,
        store: ChatStore,
        *,
        sampling: Sampling,
        keymap: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        allow_unoptimized: bool = False,
        proof_hold_s: float = 5.0,
        refresh_hz: float = 15.0,
        log_dir: Path | None = None,
        load_tip: str | None = None,
        prefs_dir: Path | None = None,
        reply_notice: str = "off",
    ) -> None:
        """Build the app; nothing starts before it runs.

        Args:
            backend: the model side.
            store: the history database.
            sampling: sampling for new conversations.
            keymap: binding id -> keys, from the config file.
            clock: perf_counter-like clock (tests pass a fixed one).
            allow_unoptimized: chat even when the proof failed (`--server` to a plain
                server); otherwise a failed proof shows its fixes and exits with 2.
            proof_hold_s: how long a passing proof report stays up before chatting, unless
                the user scrolls it (then it stays until Enter).
            refresh_hz: how often streamed text and live numbers are drawn.
            log_dir: where an unexpected error's traceback is written.
            load_tip: shown once chatting starts, after a start-up of `LONG_LOAD_S` or more.
            prefs_dir: where the presets and the chosen theme are kept (None: nowhere).
            reply_notice: `off`, `bell` or `osc9`: how a reply that ends while the terminal
                is not focused is announced.
        """
        super().__init__()
        self.backend = backend
        self.store = store
        self._sampling = sampling
        self._user_keymap = dict(keymap or {})
        self._clock = clock
        self._allow_unoptimized = allow_unoptimized
        self._proof_hold_s = proof_hold_s
        self._refresh_hz = refresh_hz
        self._log_dir = log_dir
        self._load_tip = load_tip
        self.crash_message: str | None = None
        """The one line for the user after an unexpected error ended the app."""
        self.proof: ProofReport | None = None
        """The start-up proof, once it ran."""
        self.engine_run_id: int | None = None
        self._startup = StartupScreen(backend.info, clock)
        self._backend_closed = False
        self._quit_code = 0
        self._quit_message: Text | None = None
        self._recovery = RecoveryFile(store.path)
        self._signalled = False
        self._presets = PresetFile(prefs_dir) if prefs_dir else None
        self._theme_file = ThemeFile(prefs_dir) if prefs_dir else None
        self._reply_notice = reply_notice
        self._theme_saved: str | None = None
        """The theme's name as the theme file holds it."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Textual's notification, with its control characters made visible."""
        shown, heading = visible(message), visible(title)
        super().notify(shown, title=heading, severity=severity, timeout=timeout, markup=markup)

    def _handle_exception(self, error: Exception) -> None:
        """An unexpected error ends the app; its traceback goes to the log, not the terminal.

        Textual's own handler prints a traceback with the local variables of every frame,
        which may hold prompts, replies or the API key. `crash_message` is the one line.
        """
        super()._handle_exception(error)
        self._exit_renderables.clear()
        cause = error.error if isinstance(error, WorkerFailed) else error
        self.crash_message = crash_line(cause, self._log_dir)

    def get_driver_class(self) -> type[Driver]:
        """`TerminalDriver` on a POSIX terminal (Textual's own elsewhere)."""
        return TerminalDriver if os.name == "posix" else super().get_driver_class()

    @property
    def terminal(self) -> TerminalDriver | None:
        """The terminal the app draws on; None headless (tests) or before it runs."""
        driver = self._driver
        return driver if isinstance(driver, TerminalDriver) else None

    async def on_mount(self) -> None:
        self.set_keymap(self._user_keymap)
        unknown = sorted(set(self._user_keymap) - {a.id for a in APP_ACTIONS + CHAT_ACTIONS})
        if unknown:
            help_keys = keys_for(action_by_id("help"), self._user_keymap)
            listed = ", ".join(unknown)
            self.notify(f"Unknown binding ids in keymap: {listed} ({help_keys} lists them).")
        self._restore_theme()
        if self.backend.info.kind == "replay":
            self.title = f"ling-chat · {replay_label(self.backend.info.replay_speed)}"
        await self.push_screen(self._startup)
        self._start_backend()

    @work(group="startup", exclusive=True)
    async def _start_backend(self) -> None:
        """Load the model with its stages on screen, then judge the proof."""
        screen = self._startup
        info = self.backend.info
        loaded_s = 0.0
        try:
            async for stage in self.backend.start():
                screen.show_stage(stage)
                loaded_s = stage.elapsed_s
            screen.show_checking()
            report = await self.backend.proof()
        except ProofFailed as error:
            found = await self._report_after_refusal()
            if found is None:
                await self._fail(error, ExitStatus.PROOF_REFUSED)
                return
            report = found
        except BackendError as error:
            await self._fail(error, ExitStatus.ERROR)
            return
        self.proof = report
        screen.show_report(report)
        if not report.ok and not self._allow_unoptimized:
            way = "Apply the fixes above, then try again"
            if info.kind == "server":
                way += ", or chat anyway with --allow-unoptimized"
            self._quit_message = proof_text(report).append(f"\n{way}.")
            self._quit_code = ExitStatus.PROOF_REFUSED
            await self.close_backend()
            await screen.wait_for_enter(
                f"ling-chat refuses to start: the model does not run as promised. {way}. "
                "Enter exits"
            )
            self.exit(return_code=self._quit_code, message=self._quit_message)
            return
        info = self.backend.info  # a server's model and version are known only now
        try:
            self.engine_run_id = self.store.record_engine_run(
                kind=info.kind,
                model=info.model,
                sglang_version=info.sglang_version,
                profile=info.profile,
                proof=report.to_dict(),
            )
        except StorageError as error:
            await self._fail(error, ExitStatus.ERROR)
            return
        proof_keys = keys_for(action_by_id("show_proof"), self._user_keymap)
        hint = "Enter starts chatting"
        if not report.ok:
            hint = f"Optimizations are NOT proven (--allow-unoptimized). {hint}"
        await screen.wait_for_enter(
            hint, timeout_s=self._proof_hold_s, tail=f"{proof_keys} shows the proof again"
        )
        context = ChatContext(
            backend=self.backend,
            store=self.store,
            proof=report,
            default_sampling=self._sampling,
            engine_run_id=self.engine_run_id,
            clock=self._clock,
            keymap=self._user_keymap,
            refresh_hz=self._refresh_hz,
            recovery=self._recovery,
            presets=self._presets,
            reply_finished=self.reply_finished,
        )
        await self.switch_screen(ChatScreen(context))
        if self._load_tip and loaded_s >= LONG_LOAD_S:
            self.notify(f"The model took {loaded_s / 60:.0f} min to load. {self._load_tip}")

    async def _report_after_refusal(self) -> ProofReport | None:
        """The report behind a `ProofFailed` from start(), when the backend has one."""
        try:
            return await self.backend.proof()
        except BackendError:
            return None

    async def _fail(self, error: LingChatError, code: int) -> None:
        """Start-up failed: show the one line, shut down, exit with `code`."""
        self._startup.show_error(str(error))
        await self.close_backend()
        message = Text(visible(f"ling-chat: error: {error}"), style="red")
        self.exit(return_code=code, message=message)

    async def close_backend(self) -> None:
        """Shut the backend down, once."""
        if not self._backend_closed:
            self._backend_closed = True
            await self.backend.shutdown()

    async def action_quit(self) -> None:
        """Quit: a reply in flight is stopped and stored, then the backend shuts down."""
        for worker in self.workers:
            if worker.group == "startup":
                worker.cancel()
        unsaved = []
        for screen in self.screen_stack:
            if isinstance(screen, ChatScreen):
                unsaved += await screen.stop_for_quit()
        await self.close_backend()
        if unsaved:
            self._quit_code = self._quit_code or ExitStatus.REPLY_UNSAVED
            self._quit_message = visible_text(Text(self._keep_unsaved(unsaved), style="red"))
        else:
            self._recovery.clear()
        self.exit(return_code=self._quit_code, message=self._quit_message)

    def _keep_unsaved(self, runs: Sequence[ReplyRun]) -> str:
        """Write replies the history could not take where there is room; the exit message."""
        count = f"{len(runs)} repl{'y' if len(runs) == 1 else 'ies'}"
        try:
            path = self._recovery.keep(runs)
        except ExportError as error:
            return f"ling-chat: {count} could not be saved to the history, nor to a file: {error}"
        return f"ling-chat: {count} could not be saved to the history; the text is in {path}"

    def stop_for_signal(self, signum: int) -> None:
        """SIGTERM or SIGHUP: quit as `action_quit` does (the reply in flight stopped and
        stored, the backend shut down, the terminal restored) and exit with 128 + signum;
        a repeated signal changes nothing."""
        if self._signalled:
            return
        self._signalled = True
        self._quit_code = signal_status(signum)
        self._quit_message = Text(f"ling-chat: stopped by {signal.Signals(signum).name}")
        self.call_later(self.action_quit)

    def on_terminal_hung_up(self, _: TerminalHungUp) -> None:
        """The terminal hung up (its window closed): as SIGHUP, also when none came."""
        self.stop_for_signal(signal.SIGHUP)

    def _restore_theme(self) -> None:
        """Use the theme chosen last time, and remember each one chosen from now on."""
        if self._theme_file is None:
            return
        try:
            name = self._theme_file.load()
        except ConfigError as error:
            self.notify(str(error), severity="error")
            name = None
        self._theme_saved = name
        if name is not None and name in self.available_themes:
            self.theme = name
        elif name is not None:
            path = self._theme_file.path
            self.notify(f"{path}: no theme is called {name!r}; the default is used.")
        self.theme_changed_signal.subscribe(self, self._theme_chosen)

    def _theme_chosen(self, theme: Theme) -> None:
        if self._theme_file is None or theme.name == self._theme_saved:
            return
        try:
            self._theme_file.save(theme.name)
        except (ConfigError, ExportError) as error:
            self.notify(f"The theme is not remembered: {error}", severity="error")
            return
        self._theme_saved = theme.name

    def reply_finished(self) -> None:
        """A reply ended: ring the bell or send an OSC 9 notice, as configured, when the
        terminal is not focused."""
        if self.app_focus or self._reply_notice == "off" or self._driver is None:
            return
        if self._reply_notice == "bell":
            self.bell()
        elif not self.is_headless:
            self._driver.write("\x1b]9;ling-chat: the reply finished\x07")

    def action_help(self) -> None:
        """Show every key and its binding id."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self._user_keymap))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette: every action of the screen, with its keys."""
        actions = APP_ACTIONS + (CHAT_ACTIONS if isinstance(screen, ChatScreen) else ())
        for action in actions:
            if action.id == "command_palette":
                continue
            target = screen if action in CHAT_ACTIONS else self
            yield SystemCommand(
                action.description,
                f"{keys_for(action, self._user_keymap)} · binding id {action.id}",
                partial(self.run_action, action.action, target),
            )
        if isinstance(screen, ChatScreen):
            yield SystemCommand(
                "New chat from preset…",
                "Start a new chat with a saved preset's settings",
                screen.presets.pick_for_new_chat,
            )
        yield SystemCommand("Theme", "Change the colour theme", self.action_change_theme)
