// What loading a new version of a service's OpenAPI document would change, before anyone reloads: operations added
// and removed, newly deprecated (or no longer), sunsets and deprecation dates moved, brownouts (x-brownouts) added,
// moved or dropped, stability changed, public or keyed.
// Operations are the same operation when they have the same method and served path template; an operationId that
// moved to another path shows as one removed and one added, each naming it.

/** What the gateway does with one operation, as the document gives it (after the config's overrides). */
export interface OperationPolicy {
  readonly method: string;
  /** The served path template, basePath included: /v1/pets/{petId}. */
  readonly path: string;
  readonly operationId: string | undefined;
  readonly deprecated: boolean;
  /** ISO 8601 instants, as the document gives them. */
  readonly deprecation: string | undefined;
  readonly sunset: string | undefined;
  readonly stability: string | undefined;
  readonly public: boolean;
  /**
   * The brownouts (hours answered 410 before the sunset), each as `<start>/<end>` in UTC and sorted by start, so that
   * two spellings of one interval (a duration or an end; another offset) are the same brownout.
   */
  readonly brownouts: readonly string[];
}

export type OperationChange =
  | { readonly kind: 'added' | 'removed'; readonly operation: OperationPolicy }
  | {
      readonly kind: 'operationId' | 'deprecated' | 'undeprecated' | 'sunset' | 'deprecation' | 'brownouts' | 'stability' | 'access';
      readonly operation: OperationPolicy;
      readonly from: string | null;
      readonly to: string | null;
    };

export function operationName(op: Pick<OperationPolicy, 'method' | 'path' | 'operationId'>): string {
  return `${op.method} ${op.path}${op.operationId ? ` (${op.operationId})` : ''}`;
}

/** Every change from `before` to `after`, in the order of `after`'s operations (removed ones last). */
export function diffOperations(before: readonly OperationPolicy[], after: readonly OperationPolicy[]): OperationChange[] {
  const key = (op: OperationPolicy): string => `${op.method} ${op.path}`;
  const old = new Map(before.map((op) => [key(op), op]));
  const changes: OperationChange[] = [];
  const seen = new Set<string>();
  for (const op of after) {
    const k = key(op);
    seen.add(k);
    const was = old.get(k);
    if (was === undefined) {
      changes.push({ kind: 'added', operation: op });
      continue;
    }
    // Config routes name operations by operationId: a renamed one no longer gets their fields.
    if (was.operationId !== op.operationId) changes.push({ kind: 'operationId', operation: op, from: was.operationId ?? null, to: op.operationId ?? null });
    if (!was.deprecated && op.deprecated) changes.push({ kind: 'deprecated', operation: op, from: null, to: op.deprecation ?? null });
    if (was.deprecated && !op.deprecated) changes.push({ kind: 'undeprecated', operation: op, from: was.deprecation ?? null, to: null });
    if (was.deprecated && op.deprecated && !sameInstant(was.deprecation, op.deprecation))
      changes.push({ kind: 'deprecation', operation: op, from: was.deprecation ?? null, to: op.deprecation ?? null });
    // A newly deprecated operation's line already names its first sunset.
    const newlyDeprecated = !was.deprecated && op.deprecated;
    if (!sameInstant(was.sunset, op.sunset) && !(newlyDeprecated && was.sunset === undefined))
      changes.push({ kind: 'sunset', operation: op, from: was.sunset ?? null, to: op.sunset ?? null });
    // A brownout answers 410 to every client for its hour: one added, moved or dropped is worth a line.
    if (was.brownouts.join(' ') !== op.brownouts.join(' '))
      changes.push({ kind: 'brownouts', operation: op, from: intervals(was.brownouts), to: intervals(op.brownouts) });
    if (was.stability !== op.stability) changes.push({ kind: 'stability', operation: op, from: was.stability ?? null, to: op.stability ?? null });
    if (was.public !== op.public) changes.push({ kind: 'access', operation: op, from: access(was), to: access(op) });
  }
  for (const op of before) if (!seen.has(key(op))) changes.push({ kind: 'removed', operation: op });
  return changes;
}

function intervals(list: readonly string[]): string | null {
  return list.length === 0 ? null : list.join(', ');
}

function access(op: OperationPolicy): string {
  return op.public ? 'public' : 'key';
}

/** Two spellings of one instant (2027-06-01 and 2027-06-01T00:00:00Z) are no change. */
function sameInstant(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return Date.parse(a) === Date.parse(b);
}

function op(c: OperationChange): string {
  return `${c.operation.method} ${c.operation.path}`;
}

/** One line per change, as `tollgate openapi diff` prints it. */
export function changeLine(c: OperationChange): string {
  const name = operationName(c.operation);
  switch (c.kind) {
    case 'added':
      return `+ ${name}`;
    case 'removed':
      return `- ${name}`;
    case 'operationId':
      return `~ ${op(c)}: operationId ${c.from ?? '(none)'} -> ${c.to ?? '(none)'}`;
    case 'deprecated':
      return `~ ${name}: newly deprecated${c.to ? ` (since ${c.to})` : ' (no date)'}${c.operation.sunset ? `, sunset ${c.operation.sunset}` : ''}`;
    case 'undeprecated':
      return `~ ${name}: no longer deprecated`;
    case 'deprecation':
      return `~ ${name}: deprecation date ${c.from ?? '(none)'} -> ${c.to ?? '(none)'}`;
    case 'sunset':
      return `~ ${name}: sunset ${c.from ?? '(none)'} -> ${c.to ?? '(none)'}${sunsetEarlier(c.from, c.to) ? ' (earlier)' : ''}`;
    case 'brownouts':
      return `~ ${name}: brownouts ${c.from ?? '(none)'} -> ${c.to ?? '(none)'}`;
    case 'stability':
      return `~ ${name}: stability ${c.from ?? '(none)'} -> ${c.to ?? '(none)'}`;
    case 'access':
      return `~ ${name}: ${c.to === 'public' ? 'now public (no key needed)' : 'now needs a key'}`;
  }
}

function sunsetEarlier(from: string | null, to: string | null): boolean {
  if (to === null) return false;
  return from === null || Date.parse(to) < Date.parse(from);
}
