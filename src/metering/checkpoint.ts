// The metering export's durable checkpoint, per destination, in Redis: for each key-hour, the counts that destination
// acknowledged, written only after it acknowledged the batch that carried them (a crash before that write sends the
// batch again: at least once, and every event's id is stable so a destination that de-duplicates by id keeps it
// once). What an hour was acknowledged with is what a correction is measured against; the mark is the hour through
// which every key was acknowledged, where the next run starts reading (less the re-check window).
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import { DAY_MS } from '../util/time.js';

/** The counts a destination acknowledged for one key-hour, and how many corrections of it it acknowledged. */
export interface SentCounts {
  /** admitted, refused, upstreamFailed as last acknowledged. */
  a: number;
  r: number;
  f: number;
  /** Corrections acknowledged (0: only the hour's first event). */
  n: number;
  /** The consumer of the part that owns the key-hour's plain id ('' none): see export.ts, "split hours". */
  c: string;
}

/** A checkpoint field: which day's hash it lives in, and its name there. */
export interface CheckpointField {
  hourMs: number;
  field: string;
}

const dayName = (hourMs: number): string => new Date(hourMs).toISOString().slice(0, 10);

/** Fields per HMGET: a run over thousands of keys reads their hours in a few calls, none of them large. */
const FIELDS_PER_READ = 1000;

export class Checkpoint {
  /** `keepDays`: how long after its day a day's hash is kept (the ledger's retention, and a day more). */
  constructor(
    private readonly redis: Pick<RedisCommands, 'hmget' | 'hset' | 'pexpire' | 'get' | 'set'>,
    private readonly ks: Keyspace,
    readonly destination: string,
    private readonly keepDays: number,
  ) {}

  /** What was acknowledged for each field asked (absent: nothing yet). */
  async read(fields: readonly CheckpointField[]): Promise<Map<string, SentCounts>> {
    const byDay = new Map<string, string[]>();
    for (const f of fields) {
      const d = dayName(f.hourMs);
      const list = byDay.get(d) ?? [];
      list.push(f.field);
      byDay.set(d, list);
    }
    const out = new Map<string, SentCounts>();
    for (const [day, list] of byDay)
      for (let i = 0; i < list.length; i += FIELDS_PER_READ) {
        const chunk = list.slice(i, i + FIELDS_PER_READ);
        const values = await this.redis.hmget(this.ks.meteringDone(this.destination, day), ...chunk);
        values.forEach((v, j) => {
          if (v !== null) out.set(chunk[j]!, parse(v));
        });
      }
    return out;
  }

  /** Records what a destination acknowledged: one HSET per day's hash, which then expires keepDays after its day. */
  async record(entries: ReadonlyArray<CheckpointField & { sent: SentCounts }>): Promise<void> {
    const byDay = new Map<string, Record<string, string>>();
    for (const e of entries) {
      const d = dayName(e.hourMs);
      const fields = byDay.get(d) ?? {};
      fields[e.field] = JSON.stringify(e.sent);
      byDay.set(d, fields);
    }
    for (const [day, fields] of byDay) {
      const key = this.ks.meteringDone(this.destination, day);
      await this.redis.hset(key, fields);
      await this.redis.pexpire(key, Date.parse(`${day}T00:00:00Z`) + (this.keepDays + 1) * DAY_MS - Date.now());
    }
  }

  /** The hour (its end, ms) through which every key was acknowledged; undefined before the first complete run. */
  async mark(): Promise<number | undefined> {
    const v = await this.redis.get(this.ks.meteringMark(this.destination));
    return v === null ? undefined : Number(v);
  }

  async setMark(endMs: number): Promise<void> {
    await this.redis.set(this.ks.meteringMark(this.destination), String(endMs));
  }
}

function parse(v: string): SentCounts {
  const o = JSON.parse(v) as Partial<SentCounts>;
  return { a: o.a ?? 0, r: o.r ?? 0, f: o.f ?? 0, n: o.n ?? 0, c: o.c ?? '' };
}
