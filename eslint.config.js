// ESLint (flat config): JavaScript's recommended rules and typescript-eslint's recommended ones, without type
// information (fast: the whole tree in seconds; tsc already checks types). Formatting is Prettier's job, so
// eslint-config-prettier turns off every stylistic rule that could disagree with it.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // A leading underscore marks a parameter or binding that is there on purpose and unused (Express's 4-argument
      // error handler, a destructured field left out of a copy).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      // An empty catch is how this code says "a failure here changes nothing" (each one carries a comment or sits in a
      // one-line .catch(() => {})).
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
  {
    // The dashboard's and the consumer portal's modules run in the browser (public/: app.js and its views, ES modules).
    files: ['src/dashboard/public/**/*.js', 'src/portal/public/**/*.js'],
    languageOptions: { sourceType: 'module', globals: { ...globals.browser } },
  },
  {
    // Browser code the benchmark and tests inject into pages, if any, and the .mjs scripts run on Node as well.
    files: ['**/*.mjs'],
    languageOptions: { globals: { ...globals.node } },
  },
  prettier,
);
