// `tollgate usage export`: the usage ledger's closed hours as CloudEvents (or Lago's or Stripe's events) to a URL or a
// file, once, from where the destination's checkpoint left off; what it sent and the checkpoint printed. The events
// thread runs the same export every `events.metering.every` seconds (src/metering/export.ts).
import { type Command, Option } from 'commander';
import { runMeteringOnce, ExportBusy, METERING_DEFAULTS, type MeteringSettings, type RunReport } from '../metering/export.js';
import { defaultEventSource, type MeteringConfig } from '../config/sections/events.js';
import { loadConfigFile, resolveConfigPath } from '../config/load.js';
import { FORMATS, type Format } from '../metering/mappings.js';
import { RedisUsageStore } from '../usage/store.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../util/time.js';
import { CliError } from './cli-error.js';
import { positiveInt } from './options.js';
import { common, withSession, type CommonOpts } from './session.js';
import { out } from './terminal.js';

/** --since: an ISO-8601 date-time, or a duration back from now: 90m, 36h, 7d. */
export function sinceOption(v: string, nowMs = Date.now()): number {
  const d = /^(\d{1,6})([mhd])$/.exec(v);
  if (d) return nowMs - Number(d[1]) * (d[2] === 'm' ? MINUTE_MS : d[2] === 'h' ? HOUR_MS : DAY_MS);
  const ms = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v) || Number.isNaN(ms))
    throw new CliError(`--since must be an ISO-8601 date-time or a duration such as 36h or 7d, got "${v}"`, 2);
  return ms;
}

/** --header "Name: value", repeatable. */
function headerOption(v: string, prev: Record<string, string> = {}): Record<string, string> {
  const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):\s*(.*)$/.exec(v);
  if (!m || /[\r\n]/.test(m[2]!)) throw new CliError(`--header must be "Name: value", got "${v.split(':')[0]}: ..."`, 2);
  return { ...prev, [m[1]!.toLowerCase()]: m[2]!.trim() };
}

function destinationOption(v: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(v) && !/^https?:\/\//i.test(v))
    throw new CliError(`--to must be an http(s) URL or a file path, got a ${v.split(':')[0]} URL`, 2);
  if (/^https?:\/\//i.test(v)) {
    try {
      new URL(v);
    } catch {
      throw new CliError('--to is not a valid URL', 2);
    }
  }
  if (v.trim() === '') throw new CliError('--to must name a URL or a file', 2);
  return v;
}

function idOption(v: string): string {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(v)) throw new CliError(`--id must be 1-64 characters of A-Z a-z 0-9 _ -, got "${v}"`, 2);
  return v;
}

interface ExportOpts extends CommonOpts {
  to?: string;
  format?: Format;
  since?: string;
  force?: boolean;
  json?: boolean;
  header?: Record<string, string>;
  id?: string;
  graceMinutes?: number;
  batchSize?: number;
  lagoCode?: string;
  lagoSubscriptionField?: string;
  stripeEventName?: string;
  stripeCustomerField?: string;
}

/** The human answer: one line per figure, then what was refused or skipped (on stderr, as warnings). */
function printReport(r: RunReport): void {
  out(`Exported to ${r.to} (${r.format}, checkpoint ${r.destination}): hours from ${r.from} to ${r.through}`);
  out(`  key-hours read ${r.hours}, unchanged ${r.unchanged}`);
  out(`  sent: events ${r.events}, corrections ${r.corrections}, batches ${r.batches}, refused ${r.refused.length}, skipped ${r.skipped.length}`);
  out(`  checkpoint: ${r.checkpoint.recorded} recorded this run, mark ${r.checkpoint.mark ?? 'none yet'}`);
}

/**
 * The run's settings: the flags; without --to, the config's events.metering (what the events thread runs: the same
 * destination, headers and checkpoint), each flag given overriding its field.
 */
export function exportSettings(o: ExportOpts, configured: MeteringConfig | undefined): MeteringSettings {
  if (o.to === undefined && !configured) throw new CliError('--to is required: the config has no events.metering to export to', 2);
  const base: MeteringSettings = o.to === undefined && configured ? { ...configured } : { to: o.to!, format: o.format ?? 'cloudevents' };
  const to = base.to;
  const format = o.format ?? base.format;
  if (!/^https?:\/\//i.test(to) && (format === 'lago' || format === 'stripe')) throw new CliError(`format ${format} sends to a URL, not a file`, 2);
  return {
    ...base,
    format,
    ...(o.header ? { headers: { ...(base.headers ?? {}), ...o.header } } : {}),
    ...(o.id !== undefined ? { id: o.id } : {}),
    ...(o.graceMinutes !== undefined ? { graceMinutes: o.graceMinutes } : {}),
    ...(o.batchSize !== undefined ? { batchSize: o.batchSize } : {}),
    lago: {
      ...base.lago,
      ...(o.lagoCode ? { code: o.lagoCode } : {}),
      ...(o.lagoSubscriptionField ? { subscriptionField: o.lagoSubscriptionField } : {}),
    },
    stripe: {
      ...base.stripe,
      ...(o.stripeEventName ? { eventName: o.stripeEventName } : {}),
      ...(o.stripeCustomerField ? { customerField: o.stripeCustomerField } : {}),
    },
  };
}

export function registerUsageExport(usage: Command): void {
  common(usage.command('export'))
    .description("send the usage ledger's closed hours to a URL or a file, from where its checkpoint left off")
    .option(
      '--to <url|file>',
      "an http(s) URL the events are POSTed to, or a file they are appended to (JSON lines); default the config's events.metering (its settings and checkpoint)",
      destinationOption,
    )
    .addOption(new Option('--format <f>', 'cloudevents, openmeter, lago or stripe (lago and stripe: URLs only; default cloudevents)').choices([...FORMATS]))
    .option('--since <iso|duration>', 'read from this instant (ISO-8601) or this long ago (90m, 36h, 7d) instead of the checkpoint')
    .option('--force', 'send every hour read again as usage.hour, even those the destination acknowledged')
    .option('--header <name: value>', 'a header for every request (repeatable), e.g. "Authorization: Bearer ..."', headerOption)
    .option('--id <id>', "the checkpoint's name (default: the format and a hash of --to)", idOption)
    .option('--grace-minutes <n>', `minutes after its end before an hour is read (default ${METERING_DEFAULTS.graceMinutes})`, positiveInt('--grace-minutes'))
    .option('--batch-size <n>', "most events per request (at most the format's own: 100; stripe 1)", positiveInt('--batch-size'))
    .option('--lago-code <code>', `lago: the billable metric's code (default ${METERING_DEFAULTS.lagoCode})`)
    .option(
      '--lago-subscription-field <field>',
      `lago: the metadata field holding external_subscription_id (default ${METERING_DEFAULTS.lagoSubscriptionField})`,
    )
    .option('--stripe-event-name <name>', `stripe: the meter's event_name (default ${METERING_DEFAULTS.stripeEventName})`)
    .option('--stripe-customer-field <field>', `stripe: the metadata field holding the Stripe customer id (default ${METERING_DEFAULTS.stripeCustomerField})`)
    .option('--json', 'print the run as one JSON object')
    .action(async (o: ExportOpts) => {
      const sinceMs = o.since !== undefined ? sinceOption(o.since) : undefined;
      if (o.to !== undefined && !/^https?:\/\//i.test(o.to) && (o.format === 'lago' || o.format === 'stripe'))
        throw new CliError(`--format ${o.format} sends to a URL, not a file`, 2);
      // Without --to the config's section is the destination: said before Redis is asked anything when there is none.
      if (o.to === undefined) {
        const loaded = await loadConfigFile(resolveConfigPath(o.config, process.env), process.env);
        if (loaded.ok) exportSettings(o, loaded.config.events?.metering);
      }
      await withSession(o, async (s) => {
        const settings = exportSettings(o, s.config.events?.metering);
        let report: RunReport;
        try {
          report = await runMeteringOnce(
            settings,
            {
              redis: s.redis.client,
              keyspace: s.keyspace,
              usage: new RedisUsageStore(s.redis.client, s.keyspace, s.keys.reads),
              keys: s.keys.records,
              consumers: s.consumerStore,
              source: s.config.events?.source ?? defaultEventSource(s.config.redis?.prefix),
              retentionDays: s.config.usage.retentionDays,
            },
            { ...(sinceMs !== undefined ? { sinceMs } : {}), force: o.force === true },
          );
        } catch (err) {
          if (err instanceof ExportBusy) throw new CliError(err.message);
          throw err;
        }
        if (o.json) out(JSON.stringify(report));
        else printReport(report);
        for (const k of report.skipped) process.stderr.write(`warning: skipped ${k.id}: ${k.reason}\n`);
        for (const k of report.refused) process.stderr.write(`warning: refused ${k.id}: ${k.reason}\n`);
        if (report.failed) throw new CliError(`the export stopped: ${report.failed}; run it again to go on from the checkpoint`);
        if (report.refused.length > 0) throw new CliError(`${report.refused.length} event(s) refused by the destination; they are sent again on the next run`);
      });
    });
}
