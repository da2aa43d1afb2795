"""The model build: :mod:`.build` is the one driver (graph -> kernels -> schedules -> compile -> plan ->
module) with a profile per target kind; :mod:`.llvm` and :mod:`.cuda` compile kernels, :mod:`.entries`
emits the CPU run entries, :mod:`.plan` places buffers and :mod:`.plan_check` checks the run list."""
