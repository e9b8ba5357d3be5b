"""The test kit for bots built on tierbot: fakes behind the ordinary seams (docs/testing.md).

``FakeDiscord`` serves Discord's REST API and gateway; ``FakeSlack`` serves the
Slack Web API and Socket Mode, and ``post_signed_event`` plays Slack's Events
API against an adapter in HTTP mode.  Both run on 127.0.0.1, the real
discord.py and slack-bolt clients talk to them, and they record every request.
:mod:`tierbot.testing.llm_server` is the same for the OpenAI and Anthropic
APIs, and :mod:`tierbot.testing.scripted` a scripted in-process provider.
The runtime never imports this package.
"""

from tierbot.testing.discord_server import FakeDiscord, RecordedRequest
from tierbot.testing.slack_server import ApiCall, FakeSlack, post_signed_event, sign

__all__ = ["ApiCall", "FakeDiscord", "FakeSlack", "RecordedRequest", "post_signed_event", "sign"]
