// In-process KeyStore: static keys from the config's `keys:` list and `tollgate dev`. One instance only.
import type { ChangeFeedListeners, FoundKey, ImportLock, KeyChange, KeyStore, StoredKey } from './types.js';
import { KeyStoreError } from './types.js';
import { rememberKeyPrefix } from '../http/credentials.js';

export class MemoryKeyStore implements KeyStore {
  private readonly byId = new Map<string, StoredKey>();
  private readonly idByHash = new Map<string, { id: string; untilMs?: number }>();
  private readonly listeners = new Set<(id: string, change?: KeyChange) => void>();
  private readonly hashListeners = new Set<(hash: string) => void>();
  /** Hashes keys once had (rotated away, revoked) -> the key id: kept for good. */
  private readonly retiredOwner = new Map<string, string>();
  private importing = false;
  /** Consumer id -> key id -> the key's record as JSON: the Redis store's consumer mirror, kept the same way. */
  private readonly mirrors = new Map<string, Map<string, string>>();

  constructor(private readonly now: () => number = Date.now) {}

  async findByHash(hash: string): Promise<FoundKey | undefined> {
    const link = this.idByHash.get(hash);
    if (!link) return undefined;
    if (link.untilMs !== undefined && this.now() >= link.untilMs) {
      this.idByHash.delete(hash);
      return undefined;
    }
    const key = this.copy(this.byId.get(link.id));
    return key && { key };
  }

  async get(id: string): Promise<StoredKey | undefined> {
    return this.copy(this.byId.get(id));
  }

  async ids(): Promise<string[]> {
    return [...this.byId.keys()].sort();
  }

  async *idBatches(): AsyncGenerator<string[]> {
    const ids = [...this.byId.keys()].sort();
    for (let i = 0; i < ids.length; i += 1000) yield ids.slice(i, i + 1000);
  }

  async keyCount(): Promise<number> {
    return this.byId.size;
  }

  async forEachHash(each: (hashes: readonly string[]) => void): Promise<void> {
    each([...this.idByHash.keys()]);
  }

  async list(): Promise<StoredKey[]> {
    return [...this.byId.values()].map((k) => ({ ...k }));
  }

  async create(key: StoredKey): Promise<void> {
    rememberKeyPrefix(key.prefix);
    if (this.byId.has(key.id)) throw new KeyStoreError(`key id ${key.id} already exists`);
    if (this.idByHash.has(key.hash)) throw new KeyStoreError('key hash already exists');
    this.byId.set(key.id, { ...key });
    this.mirror(key, undefined);
    this.idByHash.set(key.hash, { id: key.id });
    this.tellHash(key.hash);
  }

  /** The consumers' side of a record write (redis-store.ts's mirror): the record's consumer gets its copy, the one before loses it. */
  private mirror(key: StoredKey, was: string | undefined): void {
    if (key.consumer !== undefined) {
      let m = this.mirrors.get(key.consumer);
      if (!m) this.mirrors.set(key.consumer, (m = new Map()));
      m.set(key.id, JSON.stringify(key));
    }
    if (was !== undefined && was !== key.consumer) {
      const m = this.mirrors.get(was);
      m?.delete(key.id);
      if (m?.size === 0) this.mirrors.delete(was);
    }
  }

  async consumerKeys(consumerId: string): Promise<StoredKey[]> {
    const m = this.mirrors.get(consumerId);
    if (!m) return [];
    return [...m.keys()].sort().map((id) => JSON.parse(m.get(id)!) as StoredKey);
  }

  /** A consumer's mirror as held (key id -> the record's JSON), for tests that compare it with the records. */
  mirrorOf(consumerId: string): ReadonlyMap<string, string> {
    return new Map(this.mirrors.get(consumerId));
  }

  private tellHash(hash: string): void {
    for (const fn of this.hashListeners) fn(hash);
  }

  async getVersioned(id: string): Promise<{ key: StoredKey; revision: string } | undefined> {
    const k = this.byId.get(id);
    return k && { key: { ...k }, revision: JSON.stringify(k) };
  }

  async update(key: StoredKey, opts: Parameters<KeyStore['update']>[1] = {}): Promise<void> {
    rememberKeyPrefix(key.prefix);
    const current = this.byId.get(key.id);
    if (!current) throw new KeyStoreError(`no key with id ${key.id}`, 'not_found');
    if (opts.ifRevision !== undefined && JSON.stringify(current) !== opts.ifRevision) throw new KeyStoreError(`key ${key.id} changed meanwhile`, 'conflict');
    if (opts.retireHashes) await this.retire(key.id, opts.retireHashes);
    this.byId.set(key.id, { ...key });
    this.mirror(key, current.consumer);
    for (const h of opts.unlinkHashes ?? []) this.idByHash.delete(h);
    if (opts.linkHash) this.idByHash.set(opts.linkHash, { id: key.id });
    if (opts.expireHash) this.idByHash.set(opts.expireHash.hash, { id: key.id, untilMs: opts.expireHash.atMs });
    if (opts.linkHash) this.tellHash(opts.linkHash);
  }

  async retire(id: string, hashes: readonly string[]): Promise<void> {
    for (const h of hashes) if (!this.retiredOwner.has(h)) this.retiredOwner.set(h, id);
  }

  async retiredFrom(hash: string): Promise<string | undefined> {
    return this.retiredOwner.get(hash);
  }

  async retiredHashes(id: string): Promise<string[]> {
    return [...this.retiredOwner].flatMap(([h, owner]) => (owner === id ? [h] : [])).sort();
  }

  async lockImports(): Promise<ImportLock | undefined> {
    if (this.importing) return undefined;
    this.importing = true;
    let held = true;
    return {
      held: () => held,
      release: async () => {
        if (held) this.importing = false;
        held = false;
      },
    };
  }

  async publishChange(id: string, change: KeyChange = 'record'): Promise<void> {
    for (const fn of this.listeners) fn(id, change);
  }

  async subscribe(onChange: (id: string, change?: KeyChange) => void, _onReset?: () => void, more: ChangeFeedListeners = {}): Promise<() => Promise<void>> {
    this.listeners.add(onChange);
    const onHash = more.onKeyHash?.bind(more);
    if (onHash) this.hashListeners.add(onHash);
    // In process, nothing is ever missed: listening from now on.
    more.onListening?.();
    return async () => {
      this.listeners.delete(onChange);
      if (onHash) this.hashListeners.delete(onHash);
    };
  }

  async close(): Promise<void> {
    this.listeners.clear();
    this.hashListeners.clear();
  }

  private copy(k: StoredKey | undefined): StoredKey | undefined {
    return k ? { ...k } : undefined;
  }
}
