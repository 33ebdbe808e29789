# Spack package for dct. Use this directory as a Spack repository:
#   spack repo add <dct source>/hpc/spack
#   spack install dct +cuda cuda_arch=80 ^cray-mpich     (see docs/spack.md)
from spack.package import *


class Dct(CMakePackage, CudaPackage, ROCmPackage):
    """Compressed collectives for distributed training: a drop-in for MPI_Allreduce on
    gradients (DCT-DP, error feedback) and MPI_Alltoallv on activations (DCT-MP), with a C ABI,
    C++ and Fortran bindings, a PMPI interposer and HDF5 checkpoints of the error-feedback
    state."""

    # dct has no public repository or release tarball yet: build a clone with
    #   spack develop --path <clone> dct@main && spack install    (docs/spack.md)
    # A site mirroring it adds `git = "<its URL>"` and version("main", branch="main").
    version("main")

    license("BSD-3-Clause")

    variant("fortran", default=True, description="Fortran module (use dct), needs mpi_f08")
    variant("hdf5", default=True, description="HDF5 checkpoints of the error-feedback state")
    variant("examples", default=False,
            description="Examples, the DLRM demo and dct-bench (the Slurm job scripts run them)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("cmake@3.20:", type="build")

    depends_on("mpi")
    depends_on("kokkos@3.4:")
    # Kokkos is built for the same GPUs as dct.
    depends_on("kokkos+cuda+cuda_lambda+wrapper", when="+cuda")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
    depends_on("kokkos+rocm", when="+rocm")
    for _target in ROCmPackage.amdgpu_targets:
        depends_on(f"kokkos amdgpu_target={_target}", when=f"+rocm amdgpu_target={_target}")
    depends_on("rocprim", when="+rocm")
    depends_on("hip", when="+rocm")
    depends_on("hdf5+mpi", when="+hdf5")
    depends_on("zlib-api", when="+hdf5")
    depends_on("libdeflate", when="+hdf5")  # the checkpoints' CRC-32
    # dct-ckpt's command line (header-only).
    depends_on("cli11", type="build", when="+hdf5")

    with when("+examples"):
        depends_on("blas")
        depends_on("cli11")
        depends_on("nlohmann-json")
        depends_on("zlib-api")

    depends_on("googletest", type="test")

    conflicts("+cuda", when="+rocm", msg="dct builds one GPU backend at a time")
    conflicts("+cuda", when="cuda_arch=none", msg="+cuda needs cuda_arch=<sm>, e.g. 80")
    conflicts("+rocm", when="amdgpu_target=none", msg="+rocm needs amdgpu_target=<gfx>")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("DCT_ENABLE_CUDA", "cuda"),
            self.define_from_variant("DCT_ENABLE_HIP", "rocm"),
            self.define_from_variant("DCT_ENABLE_FORTRAN", "fortran"),
            self.define_from_variant("DCT_ENABLE_HDF5", "hdf5"),
            self.define_from_variant("DCT_BUILD_EXAMPLES", "examples"),
            self.define("DCT_BUILD_TESTS", self.run_tests),
            # The MPI of the spec, not whatever mpicc is first on PATH.
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
        ]
        if spec.satisfies("+fortran"):
            args.append(self.define("MPI_Fortran_COMPILER", spec["mpi"].mpifc))
        if spec.satisfies("+hdf5"):
            args.append(self.define("HDF5_ROOT", spec["hdf5"].prefix))
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CUDA_ARCHITECTURES", spec.variants["cuda_arch"].value))
        if spec.satisfies("+rocm"):
            args.append(self.define("DCT_HIP_COMPILER", join_path(spec["hip"].prefix.bin, "hipcc")))
            args.append(
                self.define("DCT_HIP_ARCHITECTURES", spec.variants["amdgpu_target"].value)
            )
        return args

    # `spack install --test=root dct`: the whole ctest suite (the build's `check`), then the
    # install-consumer check against the installed prefix.
    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_install(self):
        self._build_consumer(join_path(self.stage.source_path, "tests", "install", "consumer"),
                             join_path(self.stage.path, "consumer-check"))

    # `spack test run dct`: the same consumer, from the sources cached at install time.
    @run_after("install")
    def cache_consumer(self):
        cache_extra_test_sources(self, [join_path("tests", "install", "consumer")])

    def test_consumer(self):
        """find_package(dct) from a separate CMake project, link dct::dct, run it on 2 ranks"""
        source = join_path(self.test_suite.current_test_cache_dir, "tests", "install", "consumer")
        self._build_consumer(source, join_path(self.test_suite.stage, "consumer"))

    def _build_consumer(self, source, build):
        spec = self.spec
        mpiexec = which(join_path(spec["mpi"].prefix.bin, "mpiexec"), "mpiexec", "srun",
                        required=True)
        cmake = which(spec["cmake"].prefix.bin.cmake if "cmake" in spec else "cmake",
                      required=True)
        cmake("-S", source, "-B", build,
              f"-DCMAKE_PREFIX_PATH={self.prefix};{spec['kokkos'].prefix}",
              f"-DMPI_C_COMPILER={spec['mpi'].mpicc}", f"-DMPIEXEC_EXECUTABLE={mpiexec.path}")
        cmake("--build", build)
        mpiexec("-n", "2", join_path(build, "consumer"))
