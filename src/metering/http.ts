// The one outbound call the metering export makes: POST a body to a destination and read its answer. Declared here as
// the part of outbound/client.ts's OutboundClient the export uses, so tests may pass a stand-in; runs open an
// OutboundClient of their own when none is passed. A destination is the operator's own configuration (or the CLI's
// --to), trusted as written like a configured webhook: no AddressGuard.
import type { OutboundRequest, OutboundResponse } from '../outbound/client.js';

export type PostRequest = Pick<OutboundRequest, 'url' | 'method' | 'headers' | 'body' | 'timeoutMs' | 'maxBodyBytes'>;
export type PostResponse = OutboundResponse;

/** What sends a request: OutboundClient satisfies it. */
export interface Poster {
  request(r: PostRequest): Promise<PostResponse>;
}

/** How long one request to a destination may take, whole: connect, headers and body. */
export const REQUEST_TIMEOUT_MS = 15_000;
