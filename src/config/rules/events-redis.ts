// Events need Redis: the outbox that makes each event once across instances, the endpoints' queues and the metering
// checkpoints all live there, and a Redis-less gateway (one instance, memory) has none of them.
import type { Ctx } from '../sections/fields.js';

export function eventsNeedRedis(cfg: { events?: unknown; redis?: unknown }, ctx: Ctx): void {
  if (cfg.events !== undefined && !cfg.redis)
    ctx.addIssue({ code: 'custom', path: ['events'], message: 'events need a redis section: the outbox, the endpoints\' queues and the metering checkpoints live in Redis' });
}
