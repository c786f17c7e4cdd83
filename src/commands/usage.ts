// `tollgate usage` and `tollgate routes deprecated`: the usage ledger and the deprecated-route report from the shared
// Redis, as a table, JSON or CSV (for billing exports and migration mail-outs). The admin API answers the same from
// the same code (src/usage/reports.ts).
import { type Command, Option } from 'commander';
import { resolvePeriod, UsageReports, type Granularity, type GroupBy, type TotalsSort } from '../usage/reports.js';
import { RedisUsageStore } from '../usage/store.js';
import { DAY_MS, HOUR_MS } from '../util/time.js';
import { bucketRows, consumerBucketRows, consumerTotalsRows, csv, deprecatedConsumerRows, deprecatedRows, totalsRows } from '../usage/csv.js';
import { consumerPlans } from '../consumers/limits-in-force.js';
import { systemClock } from '../util/clock.js';
import { CliError } from './cli-error.js';
import { isoOption } from './options.js';
import { common, withSession, type CommonOpts, type Session } from './session.js';
import { out, tabbed } from './terminal.js';
import { registerUsageExport } from './usage-export.js';

export function reports(s: Session): UsageReports {
  return new UsageReports(new RedisUsageStore(s.redis.client, s.keyspace, s.keys.reads), s.keys.records, consumerPlans(s.consumerStore, systemClock));
}

export function period(o: { from?: string; to?: string }, defaultMs: number, retentionDays: number): { fromMs: number; toMs: number } {
  const p = resolvePeriod(
    {
      fromMs: o.from !== undefined ? Date.parse(isoOption('--from', o.from)) : undefined,
      toMs: o.to !== undefined ? Date.parse(isoOption('--to', o.to)) : undefined,
    },
    defaultMs,
    retentionDays,
    Date.now(),
  );
  if (!('problem' in p)) return p;
  throw new CliError(p.problem === 'order' ? '--from must be before --to' : `the period may span at most ${p.maxDays} days (usage.retentionDays + 1)`, 2);
}

/** --group-by: rows per key (the default), or per consumer the usage was counted under. */
const groupByOption = (what: string): Option => new Option('--group-by <g>', `key, or consumer: ${what}`).choices(['key', 'consumer']).default('key');

export function registerUsageCommands(program: Command): void {
  // Positional options: `usage --to <iso>` is the report's own, `usage export --to <url>` the export's.
  const usage = common(program.command('usage')).enablePositionalOptions();
  registerUsageExport(usage);
  usage
    .description("requests per key from the usage ledger: every key's totals, or one key by hour or day (--key); or per consumer (--group-by consumer)")
    .option('--key <id>', "one key's usage over time instead of every key's totals")
    .option('--from <iso>', 'start of the period, ISO-8601 (default: 7 days, or 24 hours with --key, before --to)')
    .option('--to <iso>', 'end of the period, ISO-8601 (default: now)')
    .addOption(new Option('--granularity <g>', 'with --key: hour or day').choices(['hour', 'day']).default('hour'))
    .addOption(
      new Option('--sort <field>', 'without --key: sort by')
        .choices(['admitted', 'rateLimited', 'banned', 'upstreamFailed', 'shadowRefused', 'id'])
        .default('admitted'),
    )
    .addOption(groupByOption("what each consumer's keys were counted while in it (usage under none: the row with no consumer)"))
    .option('--csv', 'print CSV (for billing exports)')
    .option('--json', 'print JSON')
    .action(
      async (
        o: CommonOpts & {
          key?: string;
          from?: string;
          to?: string;
          granularity: Granularity;
          sort: TotalsSort;
          groupBy: GroupBy;
          csv?: boolean;
          json?: boolean;
        },
      ) => {
        await withSession(o, async (s) => {
          const r = reports(s);
          if (o.key !== undefined) {
            const k = await s.keys.listing.get(o.key);
            if (!k) throw new CliError(`no key with id "${o.key}"`);
            const p = period(o, o.granularity === 'hour' ? 24 * HOUR_MS : 7 * DAY_MS, s.config.usage.retentionDays);
            if (o.groupBy === 'consumer') {
              const u = await r.keyUsageByConsumer(k.id, p.fromMs, p.toMs, o.granularity);
              if (o.json) return out(JSON.stringify({ id: k.id, granularity: o.granularity, totals: u.totals, buckets: u.buckets, consumers: u.consumers }));
              const rows = consumerBucketRows(u.consumers);
              if (o.csv) return void process.stdout.write(csv(rows));
              return out(tabbed(rows));
            }
            const u = await r.keyUsage(k.id, p.fromMs, p.toMs, o.granularity);
            if (o.json) return out(JSON.stringify({ id: k.id, granularity: o.granularity, totals: u.totals, buckets: u.buckets }));
            const rows = bucketRows(u.buckets);
            if (o.csv) return void process.stdout.write(csv(rows));
            return out(tabbed(rows));
          }
          const p = period(o, 7 * DAY_MS, s.config.usage.retentionDays);
          if (o.groupBy === 'consumer') {
            const all = await r.consumerReport(p.fromMs, p.toMs, o.sort, o.sort === 'id' ? 'asc' : 'desc');
            if (o.json) return out(JSON.stringify({ from: new Date(p.fromMs).toISOString(), to: new Date(p.toMs).toISOString(), consumers: all }));
            const rows = consumerTotalsRows(all);
            if (o.csv) return void process.stdout.write(csv(rows));
            return out(tabbed(rows));
          }
          const t = await r.totals(p.fromMs, p.toMs, { sort: o.sort, order: o.sort === 'id' ? 'asc' : 'desc', offset: 0, limit: Number.MAX_SAFE_INTEGER });
          if (o.json) return out(JSON.stringify({ from: new Date(p.fromMs).toISOString(), to: new Date(p.toMs).toISOString(), keys: t.keys }));
          // The CSV carries each key's metadata too (last, one JSON column), for billing runs that need no join.
          const rows = totalsRows(t.keys);
          if (o.csv) return void process.stdout.write(csv(rows));
          // The table leaves the metadata column out: one JSON cell per key would break its alignment.
          out(tabbed(rows.map((row) => row.slice(0, -1))));
        });
      },
    );

  const routes = program.command('routes').description('route reports');
  common(routes.command('deprecated'))
    .description('each deprecated route, its sunset, and the keys still calling it (calls, last seen)')
    .option('--from <iso>', 'start of the period, ISO-8601 (default: usage.retentionDays before --to)')
    .option('--to <iso>', 'end of the period, ISO-8601 (default: now)')
    .addOption(groupByOption('the consumers the calls were counted under (no consumer: calls under none)'))
    .option('--csv', 'print CSV, one row per route and key (or consumer)')
    .option('--json', 'print JSON')
    .action(async (o: CommonOpts & { from?: string; to?: string; groupBy: GroupBy; csv?: boolean; json?: boolean }) => {
      await withSession(o, async (s) => {
        const p = period(o, s.config.usage.retentionDays * DAY_MS, s.config.usage.retentionDays);
        const list = await reports(s).deprecatedRoutes(p.fromMs, p.toMs, s.config.routes, o.groupBy);
        if (o.json) return out(JSON.stringify({ from: new Date(p.fromMs).toISOString(), to: new Date(p.toMs).toISOString(), routes: list }));
        const rows = o.groupBy === 'consumer' ? deprecatedConsumerRows(list) : deprecatedRows(list);
        if (o.csv) return void process.stdout.write(csv(rows));
        if (list.length === 0) return out('No deprecated routes in the config.');
        out(tabbed(rows));
      });
    });
}
