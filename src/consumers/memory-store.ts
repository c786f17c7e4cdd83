// In-process ConsumerStore: `tollgate dev` and a gateway without Redis. One instance only; records are kept as the
// JSON a Redis store would hold, so a revision is the same SHA-1 of the same bytes.
import { recordRevision } from '../keys/redis-store.js';
import { parseConsumer } from './redis-store.js';
import { ConsumerStoreError, type ConsumerRecord, type ConsumerStore } from './types.js';

export class MemoryConsumerStore implements ConsumerStore {
  private readonly byId = new Map<string, string>();
  private readonly locked = new Set<string>();
  private readonly listeners = new Set<(id: string) => void>();

  async get(id: string): Promise<ConsumerRecord | undefined> {
    return (await this.getVersioned(id))?.consumer;
  }

  async getVersioned(id: string): Promise<{ consumer: ConsumerRecord; revision: string } | undefined> {
    const raw = this.byId.get(id);
    if (raw === undefined) return undefined;
    const consumer = parseConsumer(raw);
    if (!consumer) throw new ConsumerStoreError(`consumer ${id} has an unreadable record`, 'invalid_record');
    return { consumer, revision: recordRevision(Buffer.from(raw)) };
  }

  async ids(): Promise<string[]> {
    return [...this.byId.keys()].sort();
  }

  async create(consumer: ConsumerRecord): Promise<void> {
    if (this.byId.has(consumer.id)) throw new ConsumerStoreError(`consumer id ${consumer.id} already exists`);
    this.byId.set(consumer.id, JSON.stringify(consumer));
  }

  async update(consumer: ConsumerRecord, opts: { ifRevision?: string } = {}): Promise<void> {
    this.compare(consumer.id, opts.ifRevision);
    this.byId.set(consumer.id, JSON.stringify(consumer));
  }

  async delete(id: string, opts: { ifRevision?: string } = {}): Promise<boolean> {
    if (!this.byId.has(id)) return false;
    this.compare(id, opts.ifRevision);
    this.byId.delete(id);
    return true;
  }

  private compare(id: string, ifRevision: string | undefined): void {
    const raw = this.byId.get(id);
    if (raw === undefined) throw new ConsumerStoreError(`no consumer with id ${id}`, 'not_found');
    if (ifRevision !== undefined && recordRevision(Buffer.from(raw)) !== ifRevision)
      throw new ConsumerStoreError(`consumer ${id} changed meanwhile`, 'conflict');
  }

  async lock(id: string): Promise<{ release(): Promise<void> } | undefined> {
    if (this.locked.has(id)) return undefined;
    this.locked.add(id);
    let held = true;
    return {
      release: async () => {
        if (held) this.locked.delete(id);
        held = false;
      },
    };
  }

  async publishChange(id: string): Promise<void> {
    for (const fn of this.listeners) fn(id);
  }

  async subscribe(onChange: (id: string) => void, _onReset?: () => void, more: { onListening?(): void } = {}): Promise<() => Promise<void>> {
    this.listeners.add(onChange);
    // In process, nothing is ever missed.
    more.onListening?.();
    return async () => void this.listeners.delete(onChange);
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
