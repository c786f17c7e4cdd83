// The one outbound call the metering export makes: POST a body to a destination and read its answer. Declared here by
// the shape of outbound/client.ts's OutboundClient (request -> status, headers, body), so that client can be passed in
// as it is; until the composition root passes one, fetchPoster() (Node's own fetch) stands in for it.
export interface PostRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The whole attempt: connect, headers and body. */
  timeoutMs: number;
  /** Most of the answer's body kept (the rest is discarded). */
  maxBodyBytes?: number;
}

export interface PostResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** What sends a request: OutboundClient satisfies it. */
export interface Poster {
  request(r: PostRequest): Promise<PostResponse>;
}

/** How long one request to a destination may take, whole. */
export const REQUEST_TIMEOUT_MS = 15_000;
const MAX_BODY_BYTES = 64 * 1024;

/** Node's fetch as a Poster: redirects are never followed (a 3xx is the destination's answer, not a place to go). */
export function fetchPoster(): Poster {
  return {
    async request(r: PostRequest): Promise<PostResponse> {
      const res = await fetch(r.url, {
        method: r.method ?? 'POST',
        headers: r.headers ?? {},
        ...(r.body !== undefined ? { body: r.body } : {}),
        redirect: 'manual',
        signal: AbortSignal.timeout(r.timeoutMs),
      });
      const body = Buffer.from(await res.arrayBuffer());
      const headers: Record<string, string> = {};
      res.headers.forEach((v, k) => (headers[k] = v));
      return { status: res.status, headers, body: body.subarray(0, r.maxBodyBytes ?? MAX_BODY_BYTES) };
    },
  };
}
