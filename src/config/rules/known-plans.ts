// Every plan a config names is one of its plans: a static key's plan, the plans of a route's limits, those of a
// stability map. Each rule reads plans beside another section, so each runs on the whole config (schema.ts).
import { openapiBlocks } from '../openapi-blocks.js';
import type { Ctx } from '../sections/fields.js';
import type { StaticKeyConfig } from '../sections/keys.js';
import type { ParsedRouteConfig } from '../sections/routes.js';
import type { ServiceConfig } from '../sections/services.js';
import type { UpstreamConfig } from '../sections/upstream.js';

export function stabilityPlansKnown(
  cfg: { services?: Record<string, ServiceConfig> | undefined; upstream?: UpstreamConfig | undefined; plans: Record<string, unknown> },
  ctx: Ctx,
): void {
  for (const { at, openapi } of openapiBlocks(cfg)) {
    for (const [value, plans] of Object.entries(openapi.stability ?? {})) {
      plans.forEach((plan, j) => {
        if (!Object.hasOwn(cfg.plans, plan))
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'stability', value, j],
            message: `unknown plan; expected one of ${Object.keys(cfg.plans).join(', ')}`,
            input: plan,
          });
      });
    }
  }
}

export function staticKeysUseKnownPlans(cfg: { keys: StaticKeyConfig[]; plans: Record<string, unknown> }, ctx: Ctx): void {
  cfg.keys.forEach((k, i) => {
    if (!Object.hasOwn(cfg.plans, k.plan)) {
      ctx.addIssue({ code: 'custom', path: ['keys', i, 'plan'], message: `unknown plan; expected one of ${Object.keys(cfg.plans).join(', ')}`, input: k.plan });
    }
  });
}

export function routeLimitsUseKnownPlans(cfg: { routes: ParsedRouteConfig[]; plans: Record<string, unknown> }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.auth === 'none') return;
    for (const plan of Object.keys(r.limits ?? {})) {
      if (plan !== 'default' && !Object.hasOwn(cfg.plans, plan)) {
        ctx.addIssue({
          code: 'custom',
          path: ['routes', i, 'limits', plan],
          message: `unknown plan; expected default or one of ${Object.keys(cfg.plans).join(', ')}`,
          input: plan,
        });
      }
    }
  });
}
