// What the two backend executors of a Runtime share (webgl2_executor.js, webgpu_executor.js): their programs by
// name, making a program's kernels before its first run (every compile of a call started at once), and the set-up
// phase of the programs compiled at createRuntime.
import { BundleError } from './errors.js';
import { now } from './setup_stats.js';

export class ProgramExecutor {
  /** `phase`: the set-up phase link() records (Runtime.stats.phases). Subclasses fill `programs` (name -> the
   * API's ProgramRun, which has `kernels` once made and `prepare(stats, serialCompile)`). */
  constructor(bundle, device, options, phase) {
    this.bundle = bundle;
    this.device = device;
    this.profile = !!options.profile;
    this.serialCompile = !!options.setupProfile;
    this.phase = phase;
    this.stats = null;
    this.programs = new Map();
    this.last = null;
  }

  _program(name) {
    const p = this.programs.get(name);
    if (!p) throw new BundleError(`the bundle has no program '${name}' (it has ` +
                                  `${[...this.programs.keys()].join(', ')})`, { program: name });
    return p;
  }

  /** Makes the kernels (and their storage) of the programs `names`, all compiles started before any is checked;
   * resolves to the ms waited (0 when all were ready). Throws the first compile error, naming kernel and file. */
  async prepare(names) {
    const ps = names.map((n) => this._program(n));
    if (ps.every((p) => p.kernels)) return 0;
    const t0 = now();
    await Promise.all(ps.map((p) => p.prepare(this.stats, this.serialCompile)));
    this.checkPrepared(names);
    return now() - t0;
  }

  /** Debug mode: prepares `program` and uploads `feeds`; resolves to its ProgramRun, whose debugKernel(i) runs
   * kernel i alone and reads back what it wrote, and debugFinish() reads the outputs and commits the updates. */
  async debugBegin(program, feeds) {
    const p = this._program(program);
    await this.prepare([program]);
    await p.debugBegin(feeds);
    this.last = p;
    return p;
  }

  /** After prepare(): the API's own error check (none by default). */
  checkPrepared() {}

  /** At createRuntime: prepares the programs `names` ([] with lazy compile) and records the set-up phase. */
  async link(clock, stats, names) {
    this.stats = stats;
    await this.prepare(names);
    clock?.lap(this.phase);
  }
}
