// The route-handler variant (STREAMLAB_NEXT_ROUTE=handler): forward the request and return the
// upstream's body stream as it is, so Next writes each chunk when it arrives.
export const dynamic = "force-dynamic";

async function forward(request, { params }) {
  const { path } = await params;
  const url = `${process.env.STREAMLAB_UPSTREAM ?? "http://127.0.0.1:8000"}/v1/${path.join("/")}`;
  const body = ["GET", "HEAD"].includes(request.method) ? undefined : await request.arrayBuffer();
  const headers = { "content-type": request.headers.get("content-type") ?? "application/json" };
  const upstream = await fetch(url, { method: request.method, headers, body, signal: request.signal });
  const out = new Headers();
  for (const name of ["content-type", "cache-control", "x-accel-buffering"]) {
    const value = upstream.headers.get(name);
    if (value) out.set(name, value);
  }
  return new Response(upstream.body, { status: upstream.status, headers: out });
}

export const GET = forward;
export const POST = forward;
