#!/usr/bin/env node
// The command's entry point, a file of the repository rather than of the build: npm links a package's commands
// before its build runs, and skips one whose file does not exist yet (a fresh clone's `npm ci`).
import '../dist/cli/main.js';
