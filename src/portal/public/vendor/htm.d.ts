// Types of /assets/vendor/htm.js, served from the installed htm package (dist/htm.module.js; see preact.d.ts).
export { default } from 'htm';
