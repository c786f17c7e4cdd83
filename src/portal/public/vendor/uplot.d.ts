// Types of /assets/vendor/uplot.js, served from the installed uplot package (dist/uPlot.esm.js; see preact.d.ts).
export { default } from 'uplot/dist/uPlot.js';
