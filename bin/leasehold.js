#!/usr/bin/env node
// The CLI entry point; the TypeScript sources are compiled to dist/ by `npm ci` (prepare) or `npm run build`.
import '../dist/src/cli/main.js';
