"""Every flag that deploy/ files and the command lines in docs/*.md pass to ``syncplan``
exists and is shown by the command's ``--help`` (before: the agent DaemonSet used
``--sysfs-root``, which ``syncplan agent --help`` hid)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

from syncplan.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
STOP = re.compile(r"\s(\||;|&&|\|\||>|2>|<)\s|\s#|`|\)(\s|$)")


def _sub(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return None


def _flags(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """(shown, hidden) option strings of ``parser``."""
    shown, hidden = set(), set()
    for action in parser._actions:
        names = {s for s in action.option_strings if s.startswith("--")}
        (hidden if action.help == argparse.SUPPRESS else shown).update(names)
    return shown, hidden


def _check(words: list[str], where: str, problems: list[str]) -> None:
    """``words`` follow ``syncplan``: subcommands, then arguments."""
    parser = build_parser()
    path = ["syncplan"]
    i = 0
    while i < len(words) and (nxt := _sub(parser, words[i])) is not None:
        parser, i = nxt, i + 1
        path.append(words[i - 1])
    if len(path) == 1:
        return  # not a command line (prose such as "syncplan is ...")
    shown, hidden = _flags(parser)
    for w in words[i:]:
        if not w.startswith("--") or w == "--":
            continue
        flag = w.split("=", 1)[0]
        if not re.fullmatch(r"--[a-z][a-z0-9-]*", flag):
            continue
        if flag in hidden:
            problems.append(f"{where}: {' '.join(path)} {flag} is hidden from --help")
        elif flag not in shown:
            # argparse takes unique prefixes; the docs must not rely on that
            problems.append(f"{where}: {' '.join(path)} has no flag {flag}")


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=False)
    except ValueError:
        return text.split()


def _command_lines(text: str) -> list[tuple[int, str]]:
    """(line number, the words after ``syncplan``) of each command line, continuations
    (trailing backslash) joined, stopped at a pipe, redirection or closing backtick."""
    lines = text.splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        for m in re.finditer(r"(?:^|[\s`(/'\"])syncplan\s+([a-z][^\n]*)", line):
            rest, k = m.group(1), n
            while rest.rstrip().endswith("\\") and k < len(lines):
                rest = rest.rstrip()[:-1] + " " + lines[k].strip()
                k += 1
            stop = STOP.search(rest)
            out.append((n, rest[: stop.start()] if stop else rest))
    return out


def _deploy_arg_lists(text: str) -> list[tuple[int, list[str]]]:
    """The argument lists of containers: YAML ``args:`` lists and JSON arrays after
    ``args:`` or ``CMD``."""
    out = []
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        m = re.search(r"(?:args:|CMD)\s*(\[.*\])\s*$", line)
        if m:
            out.append((n, json.loads(m.group(1))))
        elif re.fullmatch(r"\s*args:\s*", line):
            items = []
            for nxt in lines[n:]:
                item = re.fullmatch(r"\s*-\s+(.*)", nxt)
                if not item:
                    break
                items.append(item.group(1).strip().strip("'\""))
            out.append((n, items))
    return out


def test_documented_and_deployed_flags_exist_and_are_shown() -> None:
    problems: list[str] = []
    checked = 0
    for path in sorted([*REPO.glob("docs/*.md"), *(p for p in REPO.glob("deploy/**/*"))]):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        rel = path.relative_to(REPO)
        for n, rest in _command_lines(text):
            _check(_split(rest), f"{rel}:{n}", problems)
            checked += 1
        if path.parts[-3:-1] != ("docs",) and "deploy" in path.parts:
            for n, args in _deploy_arg_lists(text):
                if args and _sub(build_parser(), args[0]) is not None:
                    _check(args, f"{rel}:{n}", problems)
                    checked += 1
    assert checked > 50
    assert not problems, "\n".join(problems)


def test_the_agent_daemonset_is_checked() -> None:
    text = (REPO / "deploy/k8s/base/agent-daemonset.yaml").read_text()
    (found,) = [a for _, a in _deploy_arg_lists(text) if a and a[0] == "agent"]
    assert "--sysfs-root=/host/sys" in found
