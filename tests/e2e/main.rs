//! The end-to-end tests, one binary (as ripgrep's tests/tests.rs): real
//! BPF capture of real processes, Perfetto's importer on the output. Each
//! module is one subject; `mltrace_tests` is their library (the recorder
//! binary, workloads, tools, the allowances verdict checks grant, and the
//! turns that keep the tests that time things alone on the machine).

mod accounting_e2e;
mod async_io_e2e;
mod attach_e2e;
mod big_run_e2e;
mod block_e2e;
mod breakdown_e2e;
mod counters_e2e;
mod cuda_e2e;
mod diff_e2e;
mod gil_e2e;
mod golden;
mod jitter_e2e;
mod mapping_e2e;
mod metadata_e2e;
mod metrics_e2e;
mod mllog_e2e;
mod nccl_e2e;
mod net_e2e;
mod nodes_e2e;
mod page_cache_e2e;
mod parquet_e2e;
mod py_stacks_e2e;
mod python_module_e2e;
mod ranks_e2e;
mod record_e2e;
mod report_e2e;
mod roles_e2e;
mod sched_e2e;
mod step_waits_e2e;
mod suggest_e2e;
mod summary_e2e;
mod thread_loaders_e2e;
mod trust_e2e;
mod wakeups_e2e;
