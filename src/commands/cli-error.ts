// An error a command reports as one clear line on stderr, with the exit code it implies (1 error, 2 usage).
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
  }
}
