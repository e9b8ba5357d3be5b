"""ChannelKey: the one parser of channel keys, and the adapters' answers to bad keys."""

from __future__ import annotations

import pytest

from bot.adapters.slack import _parse_key
from tierbot.errors import AdapterError
from tierbot.keys import ChannelKey, workspace_of


@pytest.mark.parametrize(
    ("key", "platform", "workspace", "dm", "channel", "thread", "target"),
    [
        ("discord:111:222", "discord", "discord:111", False, "222", None, "222"),
        ("discord:111:222:333", "discord", "discord:111", False, "222", "333", "333"),
        ("discord:dm:42", "discord", "discord:dm:42", True, "42", None, "42"),
        ("slack:T1:C1", "slack", "slack:T1", False, "C1", None, "C1"),
        ("slack:T1:C1:1700.1", "slack", "slack:T1", False, "C1", "1700.1", "1700.1"),
        ("slack:T1:D9", "slack", "slack:T1:D9", True, "D9", None, "D9"),
        (
            "console:local",
            "console",
            "console:local",
            False,
            "console:local",
            None,
            "console:local",
        ),
        ("replay:1", "replay", "replay:1", False, "replay:1", None, "replay:1"),
    ],
)
def test_every_part_of_a_key_is_read_in_one_place(
    key: str,
    platform: str,
    workspace: str,
    dm: bool,
    channel: str,
    thread: str | None,
    target: str,
) -> None:
    k = ChannelKey.parse(key)
    assert str(k) == key
    assert (k.platform, k.workspace, k.is_dm, k.channel, k.thread, k.target) == (
        platform,
        workspace,
        dm,
        channel,
        thread,
        target,
    )
    assert workspace_of(key) == workspace


def test_a_dm_never_shares_a_workspace_with_another_dm_or_the_guild() -> None:
    spaces = {workspace_of(k) for k in ("discord:dm:1", "discord:dm:2", "discord:111:5")}
    assert len(spaces) == 3


def test_prefixes_run_from_the_platform_to_the_whole_key() -> None:
    assert ChannelKey.parse("slack:T1:C1:9.9").prefixes() == (
        "slack",
        "slack:T1",
        "slack:T1:C1",
        "slack:T1:C1:9.9",
    )


@pytest.mark.parametrize(
    "key", ["slack:T1", "slack:T1::9", "slack:T1:C1:9:9", "discord:1:2", "console:x"]
)
def test_the_slack_adapter_names_a_key_it_cannot_post_to(key: str) -> None:
    with pytest.raises(AdapterError, match="not a Slack channel key"):
        _parse_key(key)


def test_the_slack_adapter_reads_channel_and_thread() -> None:
    assert _parse_key("slack:T1:C1") == ("C1", None)
    assert _parse_key("slack:T1:C1:1700.1") == ("C1", "1700.1")
