// What a service's OpenAPI document adds to a loaded config, as plain data: the operation behind each document route
// (for request validation and reports) and where that route reads its key. No imports: config/schema.ts names these
// types, and the loader (documents.ts) that fills them in imports config/, so this file must stay below both.

/** One operation of a document, as a route of the gateway sees it. */
export interface OpenApiOperation {
  readonly service: string;
  /** The document's path as the config names it. */
  readonly file: string;
  /** JSON pointer of the operation object, e.g. /paths/~1pets~1{petId}/get. */
  readonly pointer: string;
  readonly operationId: string | undefined;
  /** Upper case. */
  readonly method: string;
  /** The OpenAPI template with basePath, e.g. /v1/pets/{petId}. */
  readonly pathTemplate: string;
  /** The bundled document (external files inlined, internal #/ refs kept): resolve refs against it. */
  readonly document: object;
  /** Path-level parameters merged with the operation's (the operation's win by name and in); may hold {$ref}. */
  readonly parameters: readonly object[];
  /** May be {$ref}. */
  readonly requestBody: object | undefined;
  readonly openapiVersion: '3.0' | '3.1';
  readonly validate: 'off' | 'shadow' | 'enforce';
}

/** What a document adds to one route of the config. */
export interface DocumentRoute {
  readonly operation: OpenApiOperation;
  /**
   * Where this route reads its key, as auth.sources texts ("bearer", "header:X-API-Key", "query:api_key"), from the
   * operation's security schemes; undefined: the config's auth.sources.
   */
  readonly keySources: readonly string[] | undefined;
}

/** The documents of a loaded config. */
export interface LoadedDocuments {
  /** By index in config.routes: the document route there, or undefined for a hand-written one. */
  readonly routes: ReadonlyArray<DocumentRoute | undefined>;
  /** Every file read (documents and the files their $refs name), absolute: --watch-config watches them. */
  readonly files: readonly string[];
  /** What `config check` and start-up say but do not refuse (unsupported security schemes, undated deprecations). */
  readonly warnings: readonly string[];
}
