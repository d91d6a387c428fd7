"""Every flag the README uses with a command (its commands table, and every other ``groupcoord
...`` it shows) is in that command's ``--help``: none hidden, none the README invents.
``--<kafka.setting>`` stands for the broker settings by their Kafka names, which the help of
serve, verify and probe names as such (with each name the command takes)."""

from __future__ import annotations

import argparse
import re

from paths import ROOT

from groupcoord.adapters.cli.main import build_parser


def _readme_commands() -> list[str]:
    """Each ``groupcoord ...`` the README shows, split at `` \\| `` into its alternatives (a later
    alternative without its command word takes the first one's: ``offsets list \\| reset``)."""
    text = (ROOT / "README.md").read_text()
    spans = re.findall(r"`(groupcoord [^`]+)`", text)
    spans += re.findall(r"^ {4,}(?:\.venv/bin/)?(groupcoord [^\n]+)$", text, flags=re.M)
    commands = []
    for span in spans:
        alternatives = span.split(" \\| ")
        first = alternatives[0].split()
        for n, alt in enumerate(alternatives):
            words = alt.split()
            if n and words and words[0] != "groupcoord":
                words = first[:2] + words
            commands.append(" ".join(words))
    return commands


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    path = []
    for word in words[1:]:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            break
        parser = sub.choices[word]
        path.append(word)
    return parser, path


def test_every_flag_the_readme_uses_is_in_the_help():
    parser = build_parser()
    commands = _readme_commands()
    assert len(commands) > 40
    hidden = []
    for command in commands:
        sub, path = _subparser(parser, command.split())
        if not path:
            continue  # groupcoord --version and the like: the top level
        shown = sub.format_help()
        for flag in re.findall(r"(?<![\w-])--[a-z<][\w.<>-]*[\w>]", command):
            by_kafka_name = "." in flag and "--<kafka.setting>" in shown and flag[2:] in shown
            if flag not in shown and not by_kafka_name:
                hidden.append(f"groupcoord {' '.join(path)}: {flag}")
    assert sorted(set(hidden)) == []


def test_the_commands_table_names_every_command():
    parser = build_parser()
    table = (ROOT / "README.md").read_text().split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    named = {" ".join(_subparser(parser, c.split())[1][:1]) for c in _readme_commands() if c in table or
             any(c.startswith(row) for row in re.findall(r"`(groupcoord [^`]+)`", table))}
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(top.choices) - named == set()
