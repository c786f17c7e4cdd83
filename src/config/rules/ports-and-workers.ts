// The gateway's listeners and processes fit together: the ops, admin and portal listeners each need a port of their own, and
// more than one worker needs Redis (workers share keys and limits only through it).
import type { Ctx } from '../sections/fields.js';

export function workersNeedRedis(cfg: { server: { workers: number | 'auto' }; redis?: unknown }, ctx: Ctx): void {
  if (cfg.server.workers !== 1 && !cfg.redis) {
    ctx.addIssue({
      code: 'custom',
      path: ['server', 'workers'],
      message: 'more than one worker needs a redis section: workers share keys and limits only through Redis',
      input: cfg.server.workers,
    });
  }
}

export function opsPortDiffers(cfg: { server: { port: number; host: string }; ops?: { port: number; host: string } }, ctx: Ctx): void {
  if (cfg.ops && cfg.ops.port !== 0 && cfg.ops.port === cfg.server.port) {
    ctx.addIssue({ code: 'custom', path: ['ops', 'port'], message: 'the ops listener needs a port of its own, not server.port', input: cfg.ops.port });
  }
}

export function adminPortDiffers(cfg: { server: { port: number }; ops?: { port: number }; admin: { port: number } }, ctx: Ctx): void {
  if (cfg.admin.port === 0) return;
  if (cfg.admin.port === cfg.server.port || cfg.admin.port === cfg.ops?.port) {
    ctx.addIssue({
      code: 'custom',
      path: ['admin', 'port'],
      message: `the admin listener needs a port of its own, not ${cfg.admin.port === cfg.server.port ? 'server.port' : 'ops.port'}`,
      input: cfg.admin.port,
    });
  }
}

export function portalPortDiffers(
  cfg: { server: { port: number }; ops?: { port: number }; admin: { port: number }; portal: { port?: number | undefined } },
  ctx: Ctx,
): void {
  const port = cfg.portal.port;
  if (port === undefined || port === 0) return;
  const taken = port === cfg.server.port ? 'server.port' : port === cfg.admin.port ? 'admin.port' : port === cfg.ops?.port ? 'ops.port' : undefined;
  if (taken) ctx.addIssue({ code: 'custom', path: ['portal', 'port'], message: `the portal listener needs a port of its own, not ${taken}`, input: port });
}
