// The configuration in force, swapped whole on SIGHUP. Request handlers read `runtime.current` per request,
// so a reload applies to the next request without dropping any connection.
import type { Config } from './schema.js';
import { compileRoutes, type CompiledRoute } from '../routes/policy.js';

export interface RuntimeConfig {
  readonly config: Config;
  readonly routes: readonly CompiledRoute[];
}

/** Fields a reload cannot change in a running process (sockets, pools and clients are built from them). */
const RESTART_ONLY: ReadonlyArray<[keyof Config, string]> = [
  ['server', 'server.*'],
  ['upstream', 'upstream.*'],
  ['redis', 'redis.*'],
  ['ops', 'ops.*'],
  ['keys', 'keys'],
];

export class Runtime {
  private state: RuntimeConfig;
  private readonly listeners: Array<(next: RuntimeConfig, prev: RuntimeConfig) => void> = [];

  constructor(config: Config) {
    this.state = { config, routes: compileRoutes(config.routes) };
  }

  get current(): RuntimeConfig {
    return this.state;
  }

  get config(): Config {
    return this.state.config;
  }

  onChange(fn: (next: RuntimeConfig, prev: RuntimeConfig) => void): void {
    this.listeners.push(fn);
  }

  /**
   * Applies a new, already validated config. Returns the restart-only sections that differ
   * (they keep their old values until a restart) so the caller can log them.
   */
  apply(next: Config): string[] {
    const ignored = RESTART_ONLY.filter(([k]) => JSON.stringify(next[k]) !== JSON.stringify(this.state.config[k])).map(([, label]) => label);
    // The log level is reloaded; the log queue's bound belongs to the stream built at start-up.
    const maxBufferBytes = this.state.config.log.maxBufferBytes;
    if (next.log.maxBufferBytes !== maxBufferBytes) ignored.push('log.maxBufferBytes');
    const merged: Config = Object.freeze({
      ...next,
      server: this.state.config.server,
      upstream: this.state.config.upstream,
      redis: this.state.config.redis,
      ops: this.state.config.ops,
      keys: this.state.config.keys,
      log: { ...next.log, maxBufferBytes },
    });
    const prev = this.state;
    this.state = { config: merged, routes: compileRoutes(merged.routes) };
    for (const fn of this.listeners) fn(this.state, prev);
    return ignored;
  }
}
