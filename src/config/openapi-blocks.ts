// Every openapi block of a config (the upstream section's and each service's) as one list, for the rule on their
// stability maps and for whatever reads their documents. Apart from sections/ because it reads two of them.
import { UPSTREAM_SERVICE, type UpstreamConfig } from './sections/upstream.js';
import type { ServiceConfig } from './sections/services.js';
import type { ServiceOpenapiConfig } from './sections/openapi.js';

/** One openapi block of a config: a service's, or the upstream section's (its service is UPSTREAM_SERVICE). */
export interface OpenapiBlock {
  /** The service its routes go to. */
  service: string;
  /** Where it is in the config: ['services', name, 'openapi'] or ['upstream', 'openapi']. */
  at: string[];
  openapi: ServiceOpenapiConfig;
  /** The upstream section's: its operations are routes without a service, so under /v1. */
  upstream: boolean;
}

/**
 * Every openapi block of a config, the upstream section's first: whatever reads documents, stability maps or their
 * files asks this, so the upstream's document is never forgotten beside the services'.
 */
export function openapiBlocks(cfg: { services?: Readonly<Record<string, Pick<ServiceConfig, 'openapi'>>> | undefined; upstream?: Pick<UpstreamConfig, 'openapi'> | undefined }): OpenapiBlock[] {
  const out: OpenapiBlock[] = [];
  if (cfg.upstream?.openapi) out.push({ service: UPSTREAM_SERVICE, at: ['upstream', 'openapi'], openapi: cfg.upstream.openapi, upstream: true });
  for (const [name, s] of Object.entries(cfg.services ?? {}))
    if (s.openapi) out.push({ service: name, at: ['services', name, 'openapi'], openapi: s.openapi, upstream: false });
  return out;
}
