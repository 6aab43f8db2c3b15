# fuzz.mk -- builds the libFuzzer harnesses of tests/fuzz with clang.
#
# Run by `make fuzz` (Makefile.am's fuzz block), which passes the variables
# below.  A separate GNU make file, so that the harnesses and the library
# sources they drive are compiled with FUZZ_CC and the fuzzer's
# instrumentation even when the rest of the tree is built with gcc: every
# source is compiled here again with -fsanitize=fuzzer-no-link,address,undefined
# into $(FUZZ_OBJDIR), and each harness is linked with -fsanitize=fuzzer.
#
#   FUZZ_CC            clang with libFuzzer
#   FUZZ_CFLAGS        optimisation and debug flags
#   FUZZ_CPPFLAGS      include paths and defines (AM_CPPFLAGS and the modules)
#   FUZZ_SRC_LIST      sources of the core library and the built-in modules,
#                      relative to the source tree (headers are left out here)
#   FUZZ_GEN_LIST      generated sources, relative to the build tree
#   FUZZ_LIB_LIST      libraries of the core library (libtool archives are
#                      left out here: their sources are in the lists above)
#   FUZZ_HARNESSES     the harnesses: tests/fuzz/NAME.c -> tests/fuzz/NAME
#   FUZZ_TOP_SRCDIR, FUZZ_TOP_BUILDDIR  absolute top directories

FUZZ_SRCDIR = $(FUZZ_TOP_SRCDIR)/tests/fuzz
FUZZ_OUTDIR = $(FUZZ_TOP_BUILDDIR)/tests/fuzz
FUZZ_LIB_SOURCES = $(addprefix $(FUZZ_TOP_SRCDIR)/,$(filter %.c,$(FUZZ_SRC_LIST))) \
	$(addprefix $(FUZZ_TOP_BUILDDIR)/,$(FUZZ_GEN_LIST))
FUZZ_LIBS = $(filter-out %.la,$(FUZZ_LIB_LIST))
FUZZ_SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
FUZZ_HARNESSES ?= fuzz_http1 fuzz_h2 fuzz_ws fuzz_path fuzz_static_path fuzz_range fuzz_grpc \
	fuzz_proxy
FUZZ_OBJDIR = $(FUZZ_OUTDIR)/obj

# one object per source, named after its path: src/runtime/conn.c -> src_conn.o
fuzz_rel = $(patsubst $(FUZZ_TOP_BUILDDIR)/%,%,$(patsubst $(FUZZ_TOP_SRCDIR)/%,%,$(1)))
fuzz_obj = $(FUZZ_OBJDIR)/$(subst /,_,$(patsubst %.c,%.o,$(call fuzz_rel,$(1))))
FUZZ_LIB_OBJS = $(foreach s,$(FUZZ_LIB_SOURCES),$(call fuzz_obj,$(s)))
FUZZ_SERVER_OBJ = $(FUZZ_OBJDIR)/fuzz_server.o

all: $(addprefix $(FUZZ_OUTDIR)/,$(FUZZ_HARNESSES))

define fuzz_compile_rule
$(call fuzz_obj,$(1)): $(1) | $(FUZZ_OBJDIR)
	@echo "  FUZZCC   $$(notdir $$@)"
	@$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -fsanitize=fuzzer-no-link \
	  -w -MMD -MP -c -o $$@ $$<
endef
$(foreach s,$(FUZZ_LIB_SOURCES),$(eval $(call fuzz_compile_rule,$(s))))

$(FUZZ_OBJDIR)/%.o: $(FUZZ_SRCDIR)/%.c | $(FUZZ_OBJDIR)
	@echo "  FUZZCC   $(notdir $@)"
	@$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -fsanitize=fuzzer-no-link \
	  -Wall -Wextra -Wno-unused-parameter -MMD -MP -c -o $@ $<

# the connection harnesses drive the whole server; the others only pieces of
# it, but linking the same objects keeps one rule
$(FUZZ_OUTDIR)/fuzz_http1 $(FUZZ_OUTDIR)/fuzz_h2 $(FUZZ_OUTDIR)/fuzz_ws: $(FUZZ_SERVER_OBJ)
$(addprefix $(FUZZ_OUTDIR)/,$(FUZZ_HARNESSES)): $(FUZZ_OUTDIR)/%: $(FUZZ_OBJDIR)/%.o $(FUZZ_LIB_OBJS)
	@echo "  FUZZLD   $(notdir $@)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

$(FUZZ_OBJDIR):
	@mkdir -p $@

-include $(wildcard $(FUZZ_OBJDIR)/*.d)

.PHONY: all
