// Drives one of our agents with the stock @ag-ui/client HttpAgent (tests/integration/
// test_agui_client.py): a message, then, while the run ends on interrupts, a resume that
// answers each of them with `decision` (a JSON tickets-API body, or "cancel").
// Prints one JSON object: every event the client saw, per run, and its final messages.
// Usage: node drive.mjs URL TOKEN MESSAGE [DECISION_JSON]
import { HttpAgent } from "@ag-ui/client";

const [url, token, message, decision] = process.argv.slice(2);
const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` } });
agent.addMessage({ id: `user-${Date.now()}`, role: "user", content: message });

const runs = [];
async function runOnce(parameters) {
  const events = [];
  const result = await agent.runAgent(parameters, {
    onEvent: ({ event }) => {
      events.push(event);
    },
  });
  runs.push({ events, result: result.result ?? null });
  return events;
}

let events = await runOnce({});
for (let round = 0; round < 3 && decision; round++) {
  const last = events[events.length - 1];
  const interrupts = last?.outcome?.type === "interrupt" ? last.outcome.interrupts : [];
  if (!interrupts.length) break;
  const resume = interrupts.map((interrupt) =>
    decision === "cancel"
      ? { interruptId: interrupt.id, status: "cancelled" }
      : { interruptId: interrupt.id, status: "resolved", payload: JSON.parse(decision) },
  );
  events = await runOnce({ resume });
}
process.stdout.write(
  JSON.stringify({ threadId: agent.threadId, runs, messages: agent.messages }) + "\n",
);
