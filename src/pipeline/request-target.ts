// What the request path does to the request target before anything else reads it: an absolute-form target is
// reduced to its path (so routing and the proxy only ever see a path, and the configured upstream is the only host
// contacted) and its authority becomes the Host, and a /v1 path an upstream may read as another path is refused.
import type { IncomingMessage } from 'node:http';
import { pathOf } from '../routing/routes.js';

/**
 * An absolute-form request target (`GET http://other.host/v1/x HTTP/1.1`) is reduced to its path and query, and a
 * fragment is dropped. Its authority replaces the Host header (RFC 9112 §3.2.2: a server that receives the absolute
 * form ignores Host and uses the target's host), so host routes, X-Forwarded-Host and the backend all see the one
 * host the request names: never a route matched on one host while the request says another. Runs before Express sees
 * the request (Express's router captures an absolute-form target's scheme and host when it starts and re-applies
 * them around every mounted handler, turning the proxied path into "/http://host").
 */
export function normalizeRequestTarget(req: IncomingMessage & { originalUrl?: string }): void {
  let url = req.url ?? '/';
  // A fragment is never part of a request target (RFC 9112 §3.2) but Node's parser lets one through. Routing ignores
  // it while the route policy and the upstream would see it (`/v1/pets/1#x` escaping a 410): it is dropped here.
  const hash = url.indexOf('#');
  if (hash >= 0) {
    url = url.slice(0, hash) || '/';
    req.url = url;
    req.originalUrl = url;
  }
  if (url.charCodeAt(0) !== 47 /* "/" */ && /^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    try {
      const u = new URL(url);
      req.url = (u.pathname || '/') + u.search;
      // u.host: name and port, no credentials; the name lower-cased as URL parsing does.
      if (u.host !== '') req.headers.host = u.host;
    } catch {
      req.url = '/';
    }
    req.originalUrl = req.url;
  }
}

/**
 * Why a /v1 path is ambiguous, as the 400's message names it; undefined for a path every upstream reads alike. The
 * path goes upstream unchanged, and what the upstream serves must be what the /v1 prefix and the route policy saw.
 * So no "." or ".." segment (also percent-encoded: `/v1/../admin`), no encoded slash or backslash (`%2F`, `%5C`: a
 * WSGI server decodes them, so `/v1/pets%2F1` is `/v1/pets/1` to Flask or Django), no backslash (a separator to
 * some servers), and no ";" (Tomcat and Spring drop `;params` from each segment, so `/v1/pets;x/1` is `/v1/pets/1`).
 */
export function ambiguityOf(requestTarget: string): string | undefined {
  const path = pathOf(requestTarget);
  // Most paths hold no ".", "%", backslash or ";" at all: nothing to look for.
  if (!MAY_BE_AMBIGUOUS.test(path)) return undefined;
  if (path.includes('%') && ENCODED_SEPARATOR.test(path)) return 'an encoded slash or backslash (%2F, %5C)';
  if (path.includes('\\')) return 'a backslash';
  if (path.includes(';')) return '";" parameters';
  if (DOT_SEGMENT.test(path.includes('%') ? path.replace(/%2e/gi, '.') : path)) return '"." or ".." segments';
  return undefined;
}

const DOT_SEGMENT = /(?:^|\/)\.\.?(?:\/|$)/;
const ENCODED_SEPARATOR = /%2f|%5c/i;
const MAY_BE_AMBIGUOUS = /[.%\\;]/;
