// `tollgate plans simulate`: the what-if of a plan's new limits from the usage ledger, as the admin API's
// POST /plans/simulate answers it (src/usage/whatif.ts), read from the shared Redis: a table, CSV or JSON.
import { type Command, Option } from 'commander';
import { DAY_MS } from '../util/time.js';
import type { SimulatedKey, WindowOutcome } from '../usage/whatif.js';
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
  from?: string;
  to?: string;
  csv?: boolean;
  json?: boolean;
}

/** A window's cell: empty when not simulated, "override <n>" when the key's own value keeps it, else its bound. */
function cell(w: WindowOutcome | null, hourly?: number): string | number {
  if (w === null) return '';
  if (w.override) return `override ${w.limit}`;
  return hourly ?? w.pointsRefusedAtLeast;
}

/**
 * One row per key (hour empty: the key's bounds over the period), then one per hour of its most refused (the top
 * TOP_HOURS; hours_affected counts them all). Points, not requests: a request takes its route's cost from a window.
 */
function rows(keys: readonly SimulatedKey[]): Array<Array<string | number>> {
  const header = [
    'id',
    'name',
    'hour',
    'peak_minute_points',
    'requests',
    'minute_points_refused_at_least',
    'day_points_refused_at_least',
    'points_refused_at_least',
    'hours_affected',
  ];
  const body = keys.flatMap((k) => [
    [k.id, k.name ?? '', '', '', '', cell(k.minute), cell(k.day), k.pointsRefusedAtLeast, k.hoursAffected],
    ...k.hours.map((h) => [k.id, k.name ?? '', h.start, h.peakMinute, h.requests, h.pointsRefusedAtLeast, '', '', '']),
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
    .option('--from <iso>', 'start of the period, ISO-8601 (default: 7 days before --to)')
    .option('--to <iso>', 'end of the period, ISO-8601 (default: now)')
    .option('--csv', 'print CSV, one row per key and one per hour')
    .option('--json', "print JSON (the admin API's answer, every key on one page)")
    .action(async (o: SimulateOpts) => {
      if (o.perMinute === undefined && o.perDay === undefined) throw new CliError('nothing to simulate: give --per-minute, --per-day or both', 2);
      await withSession(o, async (s) => {
        const current = Object.hasOwn(s.config.plans, o.plan) ? s.config.plans[o.plan] : undefined;
        if (!current) throw new CliError(`no plan named "${visible(o.plan)}" (configured: ${Object.keys(s.config.plans).join(', ')})`);
        const p = period(o, 7 * DAY_MS, s.config.usage.retentionDays);
        const sim = await reports(s).simulate({
          plan: o.plan,
          current: { perMinute: current.perMinute, perDay: current.perDay },
          perMinute: o.perMinute,
          perDay: o.perDay,
          ...p,
        });
        const from = new Date(p.fromMs).toISOString();
        const to = new Date(p.toMs).toISOString();
        if (o.json) {
          const simulated = { ...(o.perMinute !== undefined ? { perMinute: o.perMinute } : {}), ...(o.perDay !== undefined ? { perDay: o.perDay } : {}) };
          return out(
            JSON.stringify({
              plan: o.plan,
              from,
              to,
              current: { perMinute: current.perMinute, perDay: current.perDay },
              simulated,
              unit: 'points',
              ...sim,
              nextCursor: null,
            }),
          );
        }
        if (o.csv) return void process.stdout.write(csv(rows(sim.keys)));
        const change = [
          o.perMinute !== undefined ? `perMinute ${current.perMinute} -> ${o.perMinute}` : '',
          o.perDay !== undefined ? `perDay ${current.perDay} -> ${o.perDay}` : '',
        ].filter(Boolean);
        out(`plan ${o.plan}: ${change.join(', ')}, from ${from} to ${to} (lower bounds: docs/keys-and-limits.md, "What if")`);
        if (sim.keys.length > 0) out(tabbed(rows(sim.keys)));
        const t = sim.totals;
        out(`${t.keysAffected} of ${t.keysInPlan} keys affected, ${t.hours} hours, at least ${t.pointsRefusedAtLeast} points refused`);
      });
    });
}
