"""Fake chat platforms on 127.0.0.1 for tests: the real discord.py and slack-bolt talk to them.

``FakeDiscord`` serves Discord's REST API and gateway; ``FakeSlack`` serves the
Slack Web API and Socket Mode, and ``post_signed_event`` plays Slack's Events
API against an adapter in HTTP mode.  Both record every request they receive.
"""

from tierbot.testing.discord_server import FakeDiscord, RecordedRequest
from tierbot.testing.slack_server import ApiCall, FakeSlack, post_signed_event, sign

__all__ = ["ApiCall", "FakeDiscord", "FakeSlack", "RecordedRequest", "post_signed_event", "sign"]
