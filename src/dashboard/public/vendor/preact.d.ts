// Types of /assets/vendor/preact.js, which src/dashboard/routes.ts serves from the installed preact package
// (dist/preact.module.js): the page imports it by this relative path, tsc reads these types from the package.
export * from 'preact';
