// One metering export run, and the loop that runs it every `every` seconds: read the ledger's closed hours from the
// mark (less the re-check window), compare each key-hour with what the destination acknowledged (the checkpoint),
// send what is new (`usage.hour`) or changed (`usage.hour.correction`), and record each batch once acknowledged.
//
// Split hours: a key moved between consumers inside an hour has counts under both. The part first exported owns the
// plain id `<key id>:<hour>` (the checkpoint remembers which consumer that was); any other part of the hour goes out
// as `<key id>:<hour>:consumer:<id>` (or `:no-consumer`), so each part is billed to whom it was counted under.
import { randomUUID } from 'node:crypto';
import type { ConsumerRecord } from '../consumers/types.js';
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import { DAY_MS, HOUR_MS } from '../util/time.js';
import { Checkpoint, type SentCounts } from './checkpoint.js';
import { DestinationUnavailable, FileDestination, UrlDestination, destinationId, isUrl, type Destination } from './destinations.js';
import { countsOf, eventId, hourName, type ExportItem } from './events.js';
import { closedEnd, keyHours, redisNow, type KeyHour, type LedgerReader } from './hours.js';
import type { Poster } from './http.js';
import { OutboundClient } from '../outbound/client.js';
import { mappingFor, type Format, type ItemMetadata, type Mapping, type Prepared } from './mappings.js';

/** The `events.metering` config section, and what the CLI's options give. */
export interface MeteringSettings {
  /** A URL (http/https) or a file path. */
  to: string;
  format: Format;
  /** Seconds between runs of the continuous exporter. */
  every?: number;
  /** Minutes after its end before an hour is read. */
  graceMinutes?: number;
  /** Headers added to every request (Authorization). */
  headers?: Record<string, string>;
  /** The checkpoint's name; default `<format>-<12 hex of sha256(to)>`. */
  id?: string;
  /** Most events per request (never above the format's own most). */
  batchSize?: number;
  /** Hours behind the mark read again on each run, for corrections. */
  recheckHours?: number;
  lago?: { code?: string; subscriptionField?: string };
  stripe?: { eventName?: string; customerField?: string };
}

export const METERING_DEFAULTS = {
  every: 300,
  graceMinutes: 10,
  recheckHours: 48,
  lagoCode: 'tollgate_requests',
  lagoSubscriptionField: 'lagoSubscriptionId',
  stripeEventName: 'tollgate_requests',
  stripeCustomerField: 'stripeCustomerId',
} as const;

/** What a run reads and writes: the ledger and keys, the consumers' records (their metadata), Redis for its clock and checkpoint. */
export interface MeteringDeps extends LedgerReader {
  redis: Pick<RedisCommands, 'time' | 'hmget' | 'hset' | 'pexpire' | 'get' | 'set' | 'eval'>;
  keyspace: Keyspace;
  consumers: { get(id: string): Promise<ConsumerRecord | undefined> };
  /** CloudEvents `source`. */
  source: string;
  /** usage.retentionDays: how far back the ledger goes (and how long checkpoints are kept). */
  retentionDays: number;
  /** Sends the URL destinations' requests; default an OutboundClient of the run's own, closed after it. */
  poster?: Poster;
}

export interface RunOptions {
  /** Read from this instant instead of the mark less the re-check window. */
  sinceMs?: number;
  /** Send every hour read again as `usage.hour`, whatever the checkpoint says. */
  force?: boolean;
}

export interface RunReport {
  destination: string;
  to: string;
  format: Format;
  /** The hours read: [from, through). */
  from: string;
  through: string;
  /** Key-hours with counts read from the ledger (a split hour's parts counted apart). */
  hours: number;
  /** `usage.hour` events acknowledged by the destination this run. */
  events: number;
  /** `usage.hour.correction` events acknowledged. */
  corrections: number;
  /** Key-hours already acknowledged with the same counts: nothing sent. */
  unchanged: number;
  /** Requests (or file writes) made. */
  batches: number;
  /** Events the destination refused, each alone: sent again on the next run. */
  refused: Array<{ id: string; reason: string }>;
  /** Events not sent, and why (this destination cannot take them). */
  skipped: Array<{ id: string; reason: string }>;
  /** Why the run stopped before the end (the destination could not be reached); absent when it finished. */
  failed?: string;
  checkpoint: { mark: string | null; recorded: number };
}

/** A run's lock: renewed every third of it while the run is alive, so a killed run holds it back for at most this. */
const LOCK_MS = 30_000;
const RELEASE_LOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
const RENEW_LOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

export class ExportBusy extends Error {}

/** The destination and mapping the settings name. */
export function openDestination(settings: MeteringSettings, source: string, poster: Poster): { destination: Destination; mapping: Mapping } {
  const mapping = mappingFor(settings.format, {
    source,
    headers: settings.headers ?? {},
    lago: {
      code: settings.lago?.code ?? METERING_DEFAULTS.lagoCode,
      subscriptionField: settings.lago?.subscriptionField ?? METERING_DEFAULTS.lagoSubscriptionField,
    },
    stripe: {
      eventName: settings.stripe?.eventName ?? METERING_DEFAULTS.stripeEventName,
      customerField: settings.stripe?.customerField ?? METERING_DEFAULTS.stripeCustomerField,
    },
  });
  const id = destinationId(settings.format, settings.to, settings.id);
  if (isUrl(settings.to)) return { destination: new UrlDestination(id, settings.to, mapping, poster, settings.batchSize), mapping };
  if (settings.format === 'lago' || settings.format === 'stripe') throw new Error(`format ${settings.format} sends to a URL, not a file`);
  return { destination: new FileDestination(id, settings.to, settings.batchSize), mapping };
}

/** One run to the destination the settings name. */
export async function runMeteringOnce(settings: MeteringSettings, deps: MeteringDeps, opts: RunOptions = {}): Promise<RunReport> {
  const own = deps.poster ? undefined : new OutboundClient({ maxPools: 1, connectionsPerPool: 1 });
  const { destination, mapping } = openDestination(settings, deps.source, deps.poster ?? own!);
  const lock = deps.keyspace.meteringLock(destination.id);
  const token = randomUUID();
  const r = deps.redis as unknown as { set(k: string, v: string, px: 'PX', ms: number, nx: 'NX'): Promise<string | null> };
  if ((await r.set(lock, token, 'PX', LOCK_MS, 'NX')) === null)
    throw new ExportBusy(`another export to ${destination.where} (${destination.id}) is running (or one that stopped less than ${LOCK_MS / 1000} s ago)`);
  const renew = setInterval(() => void deps.redis.eval(RENEW_LOCK, 1, lock, token, LOCK_MS).catch(() => undefined), LOCK_MS / 3);
  renew.unref();
  try {
    return await exportRun(settings, deps, opts, destination, mapping);
  } finally {
    clearInterval(renew);
    await destination.close();
    await own?.close();
    await deps.redis.eval(RELEASE_LOCK, 1, lock, token).catch(() => undefined);
  }
}

async function exportRun(settings: MeteringSettings, deps: MeteringDeps, opts: RunOptions, destination: Destination, mapping: Mapping): Promise<RunReport> {
  const checkpoint = new Checkpoint(deps.redis, deps.keyspace, destination.id, deps.retentionDays + 1);
  const now = await redisNow(deps.redis);
  const through = closedEnd(now, settings.graceMinutes ?? METERING_DEFAULTS.graceMinutes);
  const mark = await checkpoint.mark();
  const earliest = Math.floor((now - (deps.retentionDays + 1) * DAY_MS) / HOUR_MS) * HOUR_MS;
  const recheck = (settings.recheckHours ?? METERING_DEFAULTS.recheckHours) * HOUR_MS;
  const from = Math.max(earliest, Math.floor((opts.sinceMs ?? (mark !== undefined ? mark - recheck : earliest)) / HOUR_MS) * HOUR_MS);
  const report: RunReport = {
    destination: destination.id,
    to: destination.where,
    format: mapping.format,
    from: new Date(from).toISOString(),
    through: new Date(Math.max(from, through)).toISOString(),
    hours: 0,
    events: 0,
    corrections: 0,
    unchanged: 0,
    batches: 0,
    refused: [],
    skipped: [],
    checkpoint: { mark: mark !== undefined ? new Date(mark).toISOString() : null, recorded: 0 },
  };
  const consumers = new Map<string, Promise<ConsumerRecord | undefined>>();
  const consumerOf = (id: string) => {
    let c = consumers.get(id);
    if (!c) consumers.set(id, (c = deps.consumers.get(id)));
    return c;
  };
  let refusedFrom: number | undefined;

  try {
    for await (const { keys, hours } of keyHours(deps, from, through)) {
      report.hours += hours.length;
      const items = await decide(hours, checkpoint, opts.force === true, report);
      if (items.length === 0) continue;
      const keyMeta = new Map(keys.map((k) => [k.id, k.metadata]));
      const ready: Prepared[] = [];
      for (const item of items) {
        const meta: ItemMetadata = {
          key: keyMeta.get(item.hour.keyId),
          consumer: item.hour.consumer ? (await consumerOf(item.hour.consumer))?.metadata : undefined,
        };
        const p = mapping.prepare(item, meta, now);
        if ('skip' in p) report.skipped.push({ id: eventId(item), reason: p.skip });
        else ready.push({ item, wire: p.wire });
      }
      for (let i = 0; i < ready.length; i += destination.maxBatch) {
        await deliver(destination, ready.slice(i, i + destination.maxBatch), report, checkpoint, (p, reason) => {
          report.refused.push({ id: eventId(p.item), reason });
          refusedFrom = Math.min(refusedFrom ?? p.item.hour.hourMs, p.item.hour.hourMs);
        });
      }
    }
  } catch (err) {
    if (!(err instanceof DestinationUnavailable)) throw err;
    report.failed = err.message;
    return report;
  }
  // The mark moves only over what this run read from the old mark on: every key acknowledged up to the first hour
  // refused (sent again next run), else up to the last closed hour.
  if (through > from && (mark === undefined || from <= mark)) {
    const next = refusedFrom ?? through;
    await checkpoint.setMark(next);
    report.checkpoint.mark = new Date(next).toISOString();
  }
  return report;
}

const sameCounts = (h: KeyHour, s: SentCounts): boolean => h.admitted === s.a && h.refused === s.r && h.upstreamFailed === s.f;

/** What each key-hour needs: its first event, a correction, or nothing (the checkpoint has these counts). */
async function decide(hours: readonly KeyHour[], checkpoint: Checkpoint, force: boolean, report: RunReport): Promise<ExportItem[]> {
  const groups = new Map<string, KeyHour[]>();
  for (const h of hours) {
    const plain = `${h.keyId}:${hourName(h.hourMs)}`;
    const g = groups.get(plain) ?? [];
    g.push(h);
    groups.set(plain, g);
  }
  const partId = (plain: string, consumer: string) => `${plain}:${consumer ? `consumer:${consumer}` : 'no-consumer'}`;
  const fields = [...groups].flatMap(([plain, parts]) => [
    { hourMs: parts[0]!.hourMs, field: plain },
    // A part that does not own the plain id has its own field: read for every part, as the owner may be another.
    ...parts.map((p) => ({ hourMs: p.hourMs, field: partId(plain, p.consumer) })),
  ]);
  const sent = await checkpoint.read(fields);
  const out: ExportItem[] = [];
  for (const [plain, parts] of groups) {
    const owner = sent.get(plain)?.c ?? parts[0]!.consumer;
    for (const h of parts) {
      const baseId = h.consumer === owner ? plain : partId(plain, h.consumer);
      const prev = sent.get(baseId);
      const counts = countsOf(h);
      if (!prev || force) {
        out.push({ hour: h, baseId, field: baseId, kind: 'hour', n: prev?.n ?? 0, delta: counts, owner });
      } else if (sameCounts(h, prev)) {
        report.unchanged++;
      } else {
        out.push({
          hour: h,
          baseId,
          field: baseId,
          kind: 'correction',
          n: prev.n + 1,
          delta: { admitted: h.admitted - prev.a, refused: h.refused - prev.r, upstreamFailed: h.upstreamFailed - prev.f },
          owner,
        });
      }
    }
  }
  return out;
}

/**
 * Sends a batch and records what was acknowledged. A refusal that names no event splits the batch in halves, each sent
 * alone (so one bad event ends up alone and refused, and every other is acknowledged); one that does (Lago) sends the
 * unnamed rest again as a batch; a lone event refused is reported and not recorded (next run sends it again).
 */
async function deliver(
  destination: Destination,
  batch: readonly Prepared[],
  report: RunReport,
  checkpoint: Checkpoint,
  onRefused: (p: Prepared, reason: string) => void,
): Promise<void> {
  if (batch.length === 0) return;
  report.batches++;
  const outcome = await destination.send(batch);
  if ('split' in outcome) {
    const half = Math.ceil(batch.length / 2);
    await deliver(destination, batch.slice(0, half), report, checkpoint, onRefused);
    await deliver(destination, batch.slice(half), report, checkpoint, onRefused);
    return;
  }
  if (outcome.acked.length > 0) {
    await checkpoint.record(
      outcome.acked.map(({ item }) => ({
        hourMs: item.hour.hourMs,
        field: item.field,
        sent: { a: item.hour.admitted, r: item.hour.refused, f: item.hour.upstreamFailed, n: item.n, c: item.owner },
      })),
    );
    report.checkpoint.recorded += outcome.acked.length;
    for (const { item } of outcome.acked) {
      if (item.kind === 'hour') report.events++;
      else report.corrections++;
    }
  }
  for (const { p, reason } of outcome.refused) onRefused(p, reason);
  await deliver(destination, outcome.resend, report, checkpoint, onRefused);
}

/** The continuous exporter: a run now and then every `every` seconds (never two at once); stop() waits for a run. */
export function startMetering(
  settings: MeteringSettings,
  deps: MeteringDeps,
  hooks: { onReport?(r: RunReport): void; onError?(err: Error): void } = {},
): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const tick = (): void => {
    running = runMeteringOnce(settings, deps).then(
      (r) => hooks.onReport?.(r),
      (err: Error) => hooks.onError?.(err),
    );
    void running.then(() => {
      if (!stopped) timer = setTimeout(tick, (settings.every ?? METERING_DEFAULTS.every) * 1000);
    });
  };
  tick();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
