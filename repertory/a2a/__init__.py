"""Remote A2A agents as tools (extra ``a2a``): ``a2a_agent(url, name=None, headers=None)``.

A call of the tool is one task of the remote agent, sent at most once, also across a crash of the
caller: the message id is derived from the run and the call (durable before the send), and a call
run again after a crash follows the remote task its first attempt opened (see
``repertory.a2a.tool``). A remote ``input-required`` suspends the calling run; a remote failure is
an error result. The server side (every agent served over A2A) is ``repertory serve``'s ``/a2a``.
"""

from repertory._extras import require

require("repertory.a2a", "a2a")

from repertory.a2a.tool import SCRATCH_KEY, A2AAgentTool, WaitingTask, a2a_agent, call_ids  # noqa: E402

__all__ = ["SCRATCH_KEY", "A2AAgentTool", "WaitingTask", "a2a_agent", "call_ids"]
