export interface OpenApiOperation {
  readonly service: string;
  readonly file: string; // the document's path as the config names it
  readonly pointer: string; // JSON pointer of the operation object, e.g. /paths/~1pets~1{petId}/get
  readonly operationId: string | undefined;
  readonly method: string; // upper case
  readonly pathTemplate: string; // OpenAPI template with basePath, e.g. /v1/pets/{petId}
  readonly document: object; // the bundled document (external files inlined, internal #/ refs kept): resolve refs against it
  readonly parameters: readonly object[]; // path-level parameters merged with the operation's (operation wins by name+in); may hold {$ref}
  readonly requestBody: object | undefined; // may be {$ref}
  readonly openapiVersion: '3.0' | '3.1';
  readonly validate: 'off' | 'shadow' | 'enforce';
}
