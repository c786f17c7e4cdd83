// `tollgate plans simulate`: the what-if of a plan's new limits from the usage ledger, as the admin API's
// POST /plans/simulate answers it (src/usage/whatif.ts), read from the shared Redis: a table, CSV or JSON.
import { type Command, Option } from 'commander';
import { DAY_MS } from '../util/time.js';
import type { PoolTotals, SimulatedConsumer, SimulatedKey, SimulationTotals, WindowOutcome } from '../usage/whatif.js';
import { csv } from '../usage/csv.js';
import { CliError } from './cli-error.js';
import { positiveInt } from './options.js';
import { common, withSession, type CommonOpts } from './session.js';
import { period, reports } from './usage.js';
import { out, tabbed } from './terminal.js';
import { visible } from '../util/visible.js';

interface SimulateOpts extends CommonOpts {
  plan: string;
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  from?: string;
  to?: string;
  groupBy: 'key' | 'consumer';
  csv?: boolean;
  json?: boolean;
}

/** A window's cell: empty when not simulated, "override <n>" when the key's own value keeps it, else its bound. */
function cell(w: WindowOutcome | null, hourly?: number): string | number {
  if (w === null) return '';
  if (w.override) return `override ${w.limit}`;
  return hourly ?? w.pointsRefusedAtLeast;
}

const FIGURES = [
  'hour',
  'peak_minute_points',
  'requests',
  'minute_points_refused_at_least',
  'day_points_refused_at_least',
  'points_refused_at_least',
  'hours_affected',
] as const;

/**
 * One row per key (hour empty: the key's bounds over the period), then one per hour of its most refused (the top
 * TOP_HOURS; hours_affected counts them all); the consumer the key belongs to now last (empty: none). Points, not
 * requests: a request takes its route's cost from a window. The month's column only when a monthly limit is simulated.
 */
function figures(month: boolean): string[] {
  return month ? [...FIGURES.slice(0, 5), 'month_points_refused_at_least', ...FIGURES.slice(5)] : [...FIGURES];
}

function rows(keys: readonly SimulatedKey[], month: boolean): Array<Array<string | number>> {
  const header = ['id', 'name', ...figures(month), 'consumer'];
  const m = (v: string | number): Array<string | number> => (month ? [v] : []);
  const body = keys.flatMap((k) => [
    [k.id, k.name ?? '', '', '', '', cell(k.minute), cell(k.day), ...m(cell(k.month ?? null)), k.pointsRefusedAtLeast, k.hoursAffected, k.consumer ?? ''],
    ...k.hours.map((h) => [k.id, k.name ?? '', h.start, h.peakMinute, h.requests, h.pointsRefusedAtLeast, '', ...m(''), '', '', k.consumer ?? '']),
  ]);
  return [header, ...body];
}

/** Grouped by consumer: the same rows per consumer's pool (keys: how many were counted under it in the period). */
function poolRows(consumers: readonly SimulatedConsumer[], month: boolean): Array<Array<string | number>> {
  const header = ['consumer', 'keys', ...figures(month)];
  const m = (v: string | number): Array<string | number> => (month ? [v] : []);
  const body = consumers.flatMap((c) => [
    [c.consumer, c.keys, '', '', '', cell(c.minute), cell(c.day), ...m(cell(c.month ?? null)), c.pointsRefusedAtLeast, c.hoursAffected],
    ...c.hours.map((h) => [c.consumer, c.keys, h.start, h.peakMinute, h.requests, h.pointsRefusedAtLeast, '', ...m(''), '', '']),
  ]);
  return [header, ...body];
}

export function registerPlansCommands(program: Command): void {
  const plans = program.command('plans').description('plan tools');
  common(plans.command('simulate'))
    .description('what if a plan had other limits: the keys, hours and at least how many points they would have refused, from the usage ledger')
    .requiredOption('--plan <name>', 'the plan')
    .addOption(
      new Option('--per-minute <n>', 'the new points per minute (a request takes its route cost; 1 by default)').argParser(positiveInt('--per-minute')),
    )
    .addOption(new Option('--per-day <n>', 'the new points per day').argParser(positiveInt('--per-day')))
    .addOption(new Option('--per-month <n>', 'the new points per calendar month (UTC)').argParser(positiveInt('--per-month')))
    .option('--from <iso>', 'start of the period, ISO-8601 (default: 7 days before --to)')
    .option('--to <iso>', 'end of the period, ISO-8601 (default: now)')
    .addOption(new Option('--group-by <g>', "key, or consumer: the plan's consumers' pools instead of its keys").choices(['key', 'consumer']).default('key'))
    .option('--csv', 'print CSV, one row per key (or consumer) and one per hour')
    .option('--json', "print JSON (the admin API's answer, every key on one page)")
    .action(async (o: SimulateOpts) => {
      if (o.perMinute === undefined && o.perDay === undefined && o.perMonth === undefined)
        throw new CliError('nothing to simulate: give --per-minute, --per-day, --per-month or several', 2);
      await withSession(o, async (s) => {
        const current = Object.hasOwn(s.config.plans, o.plan) ? s.config.plans[o.plan] : undefined;
        if (!current) throw new CliError(`no plan named "${visible(o.plan)}" (configured: ${Object.keys(s.config.plans).join(', ')})`);
        const p = period(o, 7 * DAY_MS, s.config.usage.retentionDays);
        const currentLimits = {
          perMinute: current.perMinute,
          perDay: current.perDay,
          ...(current.perMonth !== undefined ? { perMonth: current.perMonth } : {}),
        };
        const sim = await reports(s).simulate({
          plan: o.plan,
          current: currentLimits,
          perMinute: o.perMinute,
          perDay: o.perDay,
          ...(o.perMonth !== undefined ? { perMonth: o.perMonth } : {}),
          ...p,
          ...(o.groupBy === 'consumer' ? { groupBy: 'consumer' as const } : {}),
        });
        const byConsumer = o.groupBy === 'consumer';
        const from = new Date(p.fromMs).toISOString();
        const to = new Date(p.toMs).toISOString();
        if (o.json) {
          const simulated = {
            ...(o.perMinute !== undefined ? { perMinute: o.perMinute } : {}),
            ...(o.perDay !== undefined ? { perDay: o.perDay } : {}),
            ...(o.perMonth !== undefined ? { perMonth: o.perMonth } : {}),
          };
          return out(
            JSON.stringify({
              plan: o.plan,
              from,
              to,
              current: currentLimits,
              simulated,
              unit: 'points',
              totals: sim.totals,
              ...(byConsumer ? { groupBy: 'consumer', consumers: sim.consumers ?? [] } : { keys: sim.keys }),
              nextCursor: null,
            }),
          );
        }
        const month = o.perMonth !== undefined;
        const table = byConsumer ? poolRows(sim.consumers ?? [], month) : rows(sim.keys, month);
        if (o.csv) return void process.stdout.write(csv(table));
        const change = [
          o.perMinute !== undefined ? `perMinute ${current.perMinute} -> ${o.perMinute}` : '',
          o.perDay !== undefined ? `perDay ${current.perDay} -> ${o.perDay}` : '',
          o.perMonth !== undefined ? `perMonth ${current.perMonth ?? 'none'} -> ${o.perMonth}` : '',
        ].filter(Boolean);
        out(`plan ${o.plan}: ${change.join(', ')}, from ${from} to ${to} (lower bounds: docs/keys-and-limits.md, "What if")`);
        if (table.length > 1) out(tabbed(table));
        const t = sim.totals;
        const [affected, inPlan, what] =
          'consumersInPlan' in t
            ? [(t as PoolTotals).consumersAffected, t.consumersInPlan, 'consumers']
            : [(t as SimulationTotals).keysAffected, t.keysInPlan, 'keys'];
        out(`${affected} of ${inPlan} ${what} affected, ${t.hours} hours, at least ${t.pointsRefusedAtLeast} points refused`);
      });
    });
}
