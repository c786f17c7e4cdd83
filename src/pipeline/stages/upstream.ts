// Upstream: the last stages before a target is called. A body declared too large is refused without calling the
// backend, and the request's headers become the upstream's (the gateway's own identity and forwarding headers in,
// hop-by-hop headers and the key out). The proxy itself, stage 11, is src/pipeline/proxy.ts (createProxy).
import type { NextFunction, Request, Response } from 'express';
import { UPSTREAM_SERVICE, type Config } from '../../config/schema.js';
import { DEFAULT_KEY_SOURCES, isBearerScheme, withoutParams } from '../../http/credentials.js';
import { sendError } from '../../http/errors.js';
import { claimsGatewayHeader, connectionTokens, consumerMetadataHeader, forwardableMetadataValue, H, HOP_BY_HOP } from '../../http/headers.js';
import { acceptsTrailers, viaValue } from '../../http/intermediary.js';
import { forwardedTarget, METHOD_OVERRIDE_PARAM } from '../../routing/routes.js';

type Upstream = Config['upstream'];

/** 413 before the upstream is called when Content-Length already says the body is too large. */
export function declaredBodyLimit(maxBodyBytes: number) {
  return function declaredBodyLimitStage(req: Request, res: Response, next: NextFunction): void {
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBodyBytes) {
      // The body is not read; close the connection after answering rather than drain an oversized upload.
      res.setHeader('connection', 'close');
      return sendError(res, 'payload_too_large', `The request body exceeds ${maxBodyBytes} bytes.`);
    }
    next();
  };
}

/** What the upstream headers are made with besides the upstream section. */
export interface UpstreamForwarding {
  /** server.via: add a Via header. */
  via: boolean;
  /** consumers.forwardMetadata of the config in force: the consumer metadata fields the upstream gets. */
  forwardMetadata?: () => readonly string[];
}

/** A field list and each field's header name, made again only when the list is another (a reload). */
function metadataHeaders(fields: (() => readonly string[]) | undefined): () => ReadonlyArray<readonly [string, string]> {
  if (!fields) return () => [];
  let madeFor: readonly string[] | undefined;
  let made: ReadonlyArray<readonly [string, string]> = [];
  return () => {
    const list = fields();
    if (list !== madeFor) {
      made = list.map((f) => [f, consumerMetadataHeader(f)] as const);
      madeFor = list;
    }
    return made;
  };
}

/**
 * Rewrites the client's headers into the upstream request's: hop-by-hop headers out, forwarding headers in,
 * consumer headers only as the gateway sets them, and the key kept from the upstream when hideCredentials is on: what
 * the request's key sources read (an `Authorization: Bearer` header when `bearer` is one of them, the headers and query
 * parameters they name), and nothing else, so a backend's own credentials reach it.
 * Runs before the proxy because each try (upstream-try.ts) sends req.headers as they stand, Host set to the target.
 */
export function prepareUpstreamHeaders(upstream: Upstream, forwarding: UpstreamForwarding = { via: true }) {
  // The upstream span's server.address, worked out once rather than per traced request.
  const upstreamHost = new URL(upstream.url).host;
  const forwardedMetadata = metadataHeaders(forwarding.forwardMetadata);
  return function prepareUpstreamHeadersStage(req: Request, res: Response, next: NextFunction): void {
    // The service gets the path as the client sent it, less the route's stripPrefix (the target's base path is
    // prepended by the proxy), and less a key sent as a query parameter when hideCredentials is on (the rest of the
    // query as sent).
    const route = req.ctx.matchedRoute;
    const forwarded = route ? forwardedTarget(route, req.originalUrl) : req.originalUrl;
    // What carried the gateway's key is removed: the sources authentication read (the route's, else auth.sources), no
    // more. A POST whose method override was honoured loses its `_method` too (stages/routing.ts, honourOverride).
    const keySources = upstream.hideCredentials ? (req.ctx.keySources ?? route?.keySources ?? DEFAULT_KEY_SOURCES) : undefined;
    const params = req.ctx.overriddenFrom === undefined ? keySources?.params : [...(keySources?.params ?? []), METHOD_OVERRIDE_PARAM];
    req.url = params ? withoutParams(forwarded, params) : forwarded;
    const keyHeaders = keySources?.headers;
    const h = req.headers as Record<string, string | string[] | undefined>;
    const bearerKey = keySources?.bearer === true && isBearerScheme(req.headers.authorization);
    // The body keeps its framing on the upstream hop. Without a length or chunked, Node sends a GET/DELETE/OPTIONS
    // body raw and the upstream parses it as a next request: smuggled past authentication, with any X-Consumer-Id.
    // So Content-Length survives a client's `Connection: content-length`, and a chunked body (Node's parser lets
    // Transfer-Encoding through only when it ends in chunked) is re-chunked although Transfer-Encoding is hop-by-hop.
    const contentLength = h['content-length'];
    const chunkedBody = h['transfer-encoding'] !== undefined;
    // Header names the client's Connection header lists are hop-by-hop too (RFC 9110 §7.6.1).
    const dropped = connectionTokens(h.connection);

    // Append to the client's X-Forwarded-For only when the peer is a proxy we trust; otherwise the peer is the client.
    const peer = req.socket.remoteAddress ?? '';
    const trust = req.app.get('trust proxy fn') as (addr: string, i: number) => boolean;
    const prior = h['x-forwarded-for'];
    const priorText = Array.isArray(prior) ? prior.join(', ') : prior;
    const caller = req.ctx.caller;

    // One new header object, in the order each try sends it: Host and the framing, then the gateway's own headers (an
    // upstream that keeps only its first N header lines (Node: 2000) then drops the client's extras, never the
    // consumer's identity or X-Forwarded-For), then the client's, less hop-by-hop ones, Expect, any spelling of the
    // headers the gateway owns (claimsGatewayHeader) and, with hideCredentials, the key.
    const out: Record<string, string | string[]> = {};
    if (h.host !== undefined) out.host = h.host;
    if (contentLength !== undefined) out['content-length'] = contentLength;
    else if (chunkedBody) out['transfer-encoding'] = 'chunked';
    // Trailer fields ride only on a chunked body (Node refuses a Trailer header on any other); a client that keeps
    // response trailers asks the backend for them through the gateway (RFC 9110 §10.1.4, TE named in Connection).
    if (chunkedBody && contentLength === undefined && h.trailer !== undefined) out.trailer = h.trailer;
    if (req.httpVersion === '1.1' && acceptsTrailers(h.te)) {
      out.te = 'trailers';
      out.connection = 'keep-alive, TE';
    }
    if (forwarding.via) out.via = viaValue(h.via, req.httpVersion);
    out['x-forwarded-for'] = priorText && trust(peer, 0) ? `${priorText}, ${peer}` : peer;
    out['x-forwarded-proto'] = req.protocol;
    out['x-forwarded-host'] = req.host ?? '';
    if (route?.stripPrefix !== undefined) out['x-forwarded-prefix'] = route.stripPrefix;
    out[H.requestId] = res.getHeader(H.requestId) as string;
    if (caller) {
      // The customer (the key's consumer; the key itself for a key without one), the credential, the plan in force.
      out[H.consumerId] = caller.consumer?.id ?? caller.id;
      out[H.credentialId] = caller.id;
      out[H.consumerPlan] = caller.plan;
      // The consumer's metadata fields the config lists, each a header of its own; a value that cannot be a header
      // value as it is (forwardableMetadataValue) is left out rather than altered. Own properties only: a field named
      // like an Object.prototype member is not one the record has.
      const metadata = caller.consumer?.metadata;
      if (metadata)
        for (const [field, header] of forwardedMetadata()) {
          const value = Object.hasOwn(metadata, field) ? metadata[field] : undefined;
          if (forwardableMetadataValue(value)) out[header] = value;
        }
    }
    // With tracing on, the upstream call is a span of its own, and the upstream gets its trace context (the same trace
    // id as the caller's traceparent, the call span as parent; the caller's tracestate carried). Off, both headers pass
    // as the client sent them, like any other.
    const traced = req.ctx.trace;
    if (traced) {
      const service = req.ctx.service?.name;
      const span = traced.start('tollgate.upstream', 'client', {
        'server.address': service === undefined || service === UPSTREAM_SERVICE ? upstreamHost : service,
      });
      traced.inject(span, out);
      res.once('close', () => traced.end(span, undefined, res.statusCode >= 500, res.statusCode));
    }
    for (const name in h) {
      const value = h[name];
      if (value === undefined || Object.hasOwn(out, name) || NOT_FORWARDED.has(name) || dropped?.has(name) || claimsGatewayHeader(name)) continue;
      if (name === 'authorization' && bearerKey) continue;
      if (keyHeaders && keyHeaders.length > 0 && keyHeaders.includes(name)) continue;
      out[name] = value;
    }
    req.headers = out;
    next();
  };
}

/** Request headers never copied from the client: hop-by-hop ones, Expect (answered here), Trailer (set above). */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'expect', 'trailer']);
