// The official Anthropic Node SDK (npm `@anthropic-ai/sdk`) streaming a Messages request with its
// own stream helper, `client.messages.stream(body)`: it parses every event into the SDK's types
// and assembles the message, refusing events out of their documented order
// (https://docs.anthropic.com/en/api/messages-streaming). Prints the lines sdk-stream.mjs
// describes; `ping` shows only as a {"wire": "ping"} line, since the SDK drops it.
//
//   node anthropic-messages-client.mjs BASE_URL BODY_JSON [HEADERS_JSON]
//
// BASE_URL is the server's root (the SDK adds /v1/messages). Keys the SDK does not know (the
// lab's `lab` object) are sent as they are: the SDK posts the params object as the body.
import Anthropic from "@anthropic-ai/sdk";

import { print, streamWith } from "./sdk-stream.mjs";

await streamWith(Anthropic, process.env.ANTHROPIC_API_KEY || "sk-ant-lab", async (client, body) => {
  const stream = client.messages.stream(body);
  for await (const event of stream) {
    const text = event.type === "content_block_delta" && event.delta.type === "text_delta"
      ? { text: event.delta.text } : {};
    print({ event: event.type, ...text });
  }
  const message = await stream.finalMessage();
  const blocks = message.content.filter((block) => block.type === "text");
  print({ final: blocks.map((block) => block.text).join(""), status: message.stop_reason });
});
