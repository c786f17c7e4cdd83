// KeyStore test doubles that wrap a real store: one counts every call, and can be told to fail, hang,
// or drop pub/sub, so tests can prove how often (and whether) the key store is consulted.
import { KeyAdmin } from '../../src/keys/admin.js';
import type { ChangeFeedListeners, FoundKey, ImportLock, KeyChange, KeyStore, StoredKey } from '../../src/keys/types.js';
import { systemClock, type Clock } from '../../src/util/clock.js';
import { testConfig } from './gateway.js';

/** `scan`: keyCount and forEachHash, the key filter's build (not a verification's read). */
export type StoreMethod = 'findByHash' | 'get' | 'list' | 'scan' | 'create' | 'update' | 'publishChange' | 'subscribe' | 'close';

export class SpyKeyStore implements KeyStore {
  readonly calls: Record<StoreMethod, number> = { findByHash: 0, get: 0, list: 0, scan: 0, create: 0, update: 0, publishChange: 0, subscribe: 0, close: 0 };
  /** 'ok' delegates; 'fail' rejects at once; 'hang' never settles (a SIGSTOPped Redis). Counted either way. */
  mode: 'ok' | 'fail' | 'hang' = 'ok';
  /** When false, publishChange and subscribe do nothing: pub/sub is down. */
  pubsub = true;
  /** When set, findByHash reads the inner store at once but answers only once this settles (a slow reply). */
  findGate: Promise<void> | undefined;

  constructor(readonly inner: KeyStore) {}

  /** Total calls to the read methods a verification may make. */
  get reads(): number {
    return this.calls.findByHash + this.calls.get + this.calls.list;
  }

  reset(): void {
    for (const k of Object.keys(this.calls) as StoreMethod[]) this.calls[k] = 0;
  }

  private run<T>(method: StoreMethod, fn: () => Promise<T>): Promise<T> {
    this.calls[method]++;
    if (this.mode === 'fail') return Promise.reject(new Error('key store down (test)'));
    if (this.mode === 'hang') return new Promise<T>(() => {});
    return fn();
  }

  findByHash(hash: string): Promise<FoundKey | undefined> {
    const gate = this.findGate;
    return this.run('findByHash', async () => {
      const found = await this.inner.findByHash(hash);
      if (gate) await gate;
      return found;
    });
  }
  get(id: string): Promise<StoredKey | undefined> {
    return this.run('get', () => this.inner.get(id));
  }
  getVersioned(id: string): Promise<{ key: StoredKey; revision: string } | undefined> {
    return this.run('get', () => this.inner.getVersioned(id));
  }
  ids(): Promise<string[]> {
    return this.run('list', () => this.inner.ids());
  }

  list(): Promise<StoredKey[]> {
    return this.run('list', () => this.inner.list());
  }
  async *idBatches(): AsyncGenerator<string[]> {
    this.calls.list++;
    if (this.mode === 'fail') throw new Error('key store down (test)');
    yield* this.inner.idBatches();
  }
  keyCount(): Promise<number> {
    return this.run('scan', () => this.inner.keyCount());
  }
  forEachHash(each: (hashes: readonly string[]) => void): Promise<void> {
    return this.run('scan', () => this.inner.forEachHash(each));
  }
  create(key: StoredKey): Promise<void> {
    return this.run('create', () => this.inner.create(key));
  }
  update(key: StoredKey, opts?: Parameters<KeyStore['update']>[1]): Promise<void> {
    return this.run('update', () => this.inner.update(key, opts));
  }
  retire(id: string, hashes: readonly string[]): Promise<void> {
    return this.run('update', () => this.inner.retire(id, hashes));
  }
  retiredFrom(hash: string): Promise<string | undefined> {
    return this.run('get', () => this.inner.retiredFrom(hash));
  }
  retiredHashes(id: string): Promise<string[]> {
    return this.run('list', () => this.inner.retiredHashes(id));
  }
  consumerKeys(consumerId: string): Promise<StoredKey[]> {
    return this.run('list', () => this.inner.consumerKeys(consumerId));
  }
  lockImports(): Promise<ImportLock | undefined> {
    return this.inner.lockImports();
  }
  publishChange(id: string, change?: KeyChange): Promise<void> {
    this.calls.publishChange++;
    return this.pubsub ? this.inner.publishChange(id, change) : Promise.resolve();
  }
  subscribe(onChange: (id: string, change?: KeyChange) => void, onReset: () => void, more?: ChangeFeedListeners): Promise<() => Promise<void>> {
    this.calls.subscribe++;
    return this.pubsub ? this.inner.subscribe(onChange, onReset, more) : Promise.resolve(async () => {});
  }
  close(): Promise<void> {
    this.calls.close++;
    return this.inner.close();
  }
}

/**
 * Key administration on a test store, with the default config's plans and ban ladder and bans held in memory (as
 * a Redis-less gateway holds them).
 */
export function testKeyAdmin(store: KeyStore, clock: Clock = systemClock): KeyAdmin {
  const config = testConfig({ upstream: { url: 'http://127.0.0.1:9' } });
  return new KeyAdmin(store, clock, { plans: () => config.plans });
}
