// Option values the commands share, checked as commander reads them: a bad one is a usage error (exit 2) with one
// line saying what was expected, before anything is asked of Redis.
import { CliError } from './cli-error.js';

export function positiveInt(name: string) {
  return (v: string): number => {
    if (!/^[1-9]\d*$/.test(v)) throw new CliError(`${name} must be a positive whole number, got "${v}"`, 2);
    return Number(v);
  };
}

export function isoOption(name: string, v: string): string {
  const ms = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v) || Number.isNaN(ms)) throw new CliError(`${name} must be an ISO-8601 date-time, got "${v}"`, 2);
  return new Date(ms).toISOString();
}
