// OpenAPI path templates ("/pets/{petId}") as the router's patterns (path-to-regexp 8, "/pets/:petId"): a template
// variable matches one path segment, as in OpenAPI; every other character is literal.

/** A parameter name path-to-regexp takes bare; any other is quoted (":\"pet-id\""). */
const BARE_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export function routePattern(template: string): string {
  return template.replace(/\{([^{}]*)\}|[^{]+|\{/g, (m: string, name: string | undefined) => {
    if (name !== undefined) return `:${BARE_NAME.test(name) ? name : JSON.stringify(name)}`;
    // path-to-regexp's own syntax characters, written as literals.
    return m.replace(/[()[\]{}?+*!:\\]/g, '\\$&');
  });
}

/** What two templates share when they match the same requests: the variables' names do not count, nor case. */
export function templateKey(template: string): string {
  return template.replace(/\{[^{}]*\}/g, '{}').toLowerCase();
}
