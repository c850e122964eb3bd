// The official OpenAI Node SDK (npm `openai`) streaming a Responses request with its own stream
// helper, `client.responses.stream(body)`: it parses every event into the SDK's types and
// assembles the response, refusing events out of their documented order
// (https://platform.openai.com/docs/api-reference/responses-streaming). Prints the lines
// sdk-stream.mjs describes.
//
//   node openai-responses-client.mjs BASE_URL BODY_JSON [HEADERS_JSON]
//
// BASE_URL ends in /v1. Keys the SDK does not know (the lab's `lab` object) are sent as they are:
// the SDK posts the params object as the body.
import OpenAI from "openai";

import { print, streamWith } from "./sdk-stream.mjs";

await streamWith(OpenAI, process.env.OPENAI_API_KEY || "sk-lab", async (client, body) => {
  const stream = client.responses.stream(body);
  for await (const event of stream) {
    // A failure is an event the SDK yields, not an error it throws: its error object is printed.
    const extra = event.type === "response.output_text.delta" ? { text: event.delta }
      : event.type === "response.failed" ? { failure: event.response.error }
      : event.type === "error" ? { failure: { code: event.code, message: event.message } } : {};
    print({ event: event.type, sequence_number: event.sequence_number, ...extra });
  }
  const response = await stream.finalResponse();
  print({ final: response.output_text, status: response.status });
});
