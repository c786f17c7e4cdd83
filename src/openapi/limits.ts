// The bounds on reading a service's OpenAPI document, in one place: a document is configuration that a backend team
// commits, and one hostile or runaway file (a YAML alias bomb, a $ref fan-out, a generated document of 100,000
// operations) must be refused with an error naming it, never freeze the gateway that reads it. docs/openapi.md
// ("Limits") states them; the config file itself takes the same YAML alias bound.

/** Alias nodes a YAML file may expand (the `yaml` package's maxAliasCount): past it, an alias bomb, refused. */
export const MAX_YAML_ALIASES = 100;

/** Bytes of one file a document reads (the document, or a file its $refs name). */
export const MAX_DOCUMENT_FILE_BYTES = 16 * 1024 * 1024;

/** Bytes of every file one document reads, together: what bundling may inline. */
export const MAX_DOCUMENT_BYTES = 32 * 1024 * 1024;

/**
 * Values (objects, arrays, scalars) of the bundled document as a reader that follows its $refs sees it: what checking
 * it and compiling its schemas walk. A $ref counts its target's values each time (a recursive one once), so a small
 * file whose schemas each name the next twice is counted as the 2^n values it becomes.
 */
export const MAX_EXPANDED_VALUES = 4_000_000;

/** Nesting of the bundled document, $refs followed (a recursive schema counted once). */
export const MAX_DOCUMENT_DEPTH = 256;

/**
 * How long compiling one validated operation's request schemas may take (measured on the reading thread): the serving
 * event loop compiles them on the operation's first request, and every request waits meanwhile. Ajv takes about a
 * millisecond per property or branch on a busy machine (a 2,000-branch anyOf: seconds).
 */
export const MAX_OPERATION_COMPILE_MS = 1000;

/**
 * How long reading the documents of one config may take (a thread of its own: start, reload, `config check`),
 * compiling their validated operations' schemas included: past it the thread is stopped and the config refused.
 */
export const DOCUMENT_DEADLINE_MS = 120_000;

/** The heap of that thread (V8's old generation), in MB: a document that needs more is refused. */
export const DOCUMENT_HEAP_MB = 1536;

/** Its young generation, in MB. */
export const DOCUMENT_YOUNG_MB = 32;
