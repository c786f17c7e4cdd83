// admin: the admin API's listener (keys, plans, reports, the dashboard) and the tokens that open it. A listener of its
// own, on loopback by default, because it issues keys; a token is written as its SHA-256 beside an id, so the file
// holds no secret and audit lines can name who acted.
import { z } from 'zod';
import { positiveInt, type Ctx } from './fields.js';
import { listenerTls } from './listener-tls.js';

const adminToken = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected 1-64 characters of A-Z a-z 0-9 _ . -').describe('Named in audit lines; never the token.'),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits (SHA-256 of the token)').describe('SHA-256 of the token (`tollgate admin token` prints both).'),
});

export const admin = z.strictObject({
  host: z.string().min(1).default('127.0.0.1').describe('Loopback by default: the admin API issues keys; expose it only to the portal\'s network.'),
  port: z.number().int().min(0).max(65535).default(8079).describe('Port of the admin listener (0 picks a free one); must differ from server.port and ops.port.'),
  tokens: z.array(adminToken).default([]).describe('Without a token (here or in TOLLGATE_ADMIN_TOKEN) the admin API does not start.'),
  maxFailuresPerMinute: positiveInt().default(10).describe('Failed token checks one client address may make per minute; past it, 429 until the minute ends.'),
  tls: listenerTls.optional().describe('HTTPS on the admin listener (and its dashboard), as server.tls.'),
});

export function adminTokenIdsUnique(cfg: { admin: { tokens: Array<{ id: string }> } }, ctx: Ctx): void {
  const seen = new Set<string>();
  cfg.admin.tokens.forEach((t, i) => {
    // Audit lines name the CLI "cli" and TOLLGATE_ADMIN_TOKEN's token "env": a configured token may not pose as either.
    if (t.id === 'cli' || t.id === 'env')
      ctx.addIssue({ code: 'custom', path: ['admin', 'tokens', i, 'id'], message: `"${t.id}" is reserved (audit lines use it)`, input: t.id });
    if (seen.has(t.id)) ctx.addIssue({ code: 'custom', path: ['admin', 'tokens', i, 'id'], message: 'duplicate admin token id', input: t.id });
    seen.add(t.id);
  });
}

export type AdminConfig = z.output<typeof admin>;
