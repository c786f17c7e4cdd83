// Types of /assets/vendor/preact.js, which the portal listener serves from the installed preact package
// (dist/preact.module.js) as the dashboard does: the page imports it by this relative path, tsc reads these types
// from the package.
export * from 'preact';
