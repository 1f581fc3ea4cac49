/* test_optim.c: optimizers, lr schedules, gradient clipping and parameter
 * initialisation against torch 1.13 (CPU, float32).
 * Reference values were produced once by the Python quoted beside them and
 * are hardcoded; nothing here runs Python.  Optimizer updates must agree
 * within 1e-6 relative to max(|want|, 1) (about 8 float ulps at the test
 * vectors' scale of 1; the formulas replay torch's roundings, and on an
 * AVX2 host the results are bit-identical), and a wide buffer stepped in ranges must give exactly
 * the 5-element result, which covers the vector and parallel paths and the
 * independence of ranges.  Schedules agree within 1e-12 relative (closed
 * forms against torch's chained updates).  Init is checked statistically
 * at five standard errors with n = 10^6.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/init.h"
#include "runtime/optim.h"
#include "runtime/sched.h"
#include "tests/check.h"

/* Optimizer references: 4 steps (RAdam 8, as it rectifies from step 6 on)
 * from P0 with gradient G[k % 4] and lr lrs[k] at step k; want[k] is the
 * parameter after step k.  Produced by:
 *
 * import torch
 * P0 = [0.5, -1.25, 2.0, 0.0, -0.3]
 * G = [[0.1, -0.2, 0.3, -0.4, 0.05], [-0.05, 0.15, 0.25, 0.1, -0.3],
 *      [0.2, 0.0, -0.1, 0.35, 0.12], [0.01, -0.5, 0.05, -0.2, 0.4]]
 * def run(cls, lrs, **kw):
 *     p = torch.tensor(P0, requires_grad=True)
 *     opt = cls([p], lr=lrs[0], foreach=False, **kw)
 *     for k, lr in enumerate(lrs):
 *         opt.param_groups[0]['lr'] = lr
 *         p.grad = torch.tensor(G[k % 4])
 *         opt.step()
 *         print(", ".join("%.9gf" % float(x) for x in p.detach()))
 *
 * with the class, lrs and keywords in the comment above each table.
 */
static const float p0[5] = { 0.5f, -1.25f, 2.0f, 0.0f, -0.3f };
static const float grads[4][5] = {
	{ 0.1f, -0.2f, 0.3f, -0.4f, 0.05f },
	{ -0.05f, 0.15f, 0.25f, 0.1f, -0.3f },
	{ 0.2f, 0.0f, -0.1f, 0.35f, 0.12f },
	{ 0.01f, -0.5f, 0.05f, -0.2f, 0.4f },
};
static const double lr_flat_01[4] = { 0.1, 0.1, 0.1, 0.1 };
static const double lr_varied_01[4] = { 0.1, 0.05, 0.1, 0.02 };
static const double lr_flat_1[4] = { 1.0, 1.0, 1.0, 1.0 };
static const double lr_varied_1[4] = { 1.0, 0.5, 1.0, 2.0 };
static const double lr_flat_001[4] = { 0.01, 0.01, 0.01, 0.01 };
static const double lr_varied_001[4] = { 0.01, 0.005, 0.01, 0.002 };

/* sgd_plain: SGD(lr=[0.1, 0.1, 0.1, 0.1]) */
static const float want_sgd_plain[4][5] = {
	{ 0.49000001f, -1.23000002f, 1.97000003f, 0.0400000028f, -0.305000007f },
	{ 0.495000005f, -1.245f, 1.94500005f, 0.0300000031f, -0.275000006f },
	{ 0.474999994f, -1.245f, 1.95500004f, -0.00499999709f, -0.287f },
	{ 0.474000007f, -1.19500005f, 1.95000005f, 0.0150000034f, -0.326999992f },
};
/* sgd_momentum: SGD(lr=[0.1, 0.05, 0.1, 0.02], momentum=0.9) */
static const float want_sgd_momentum[4][5] = {
	{ 0.49000001f, -1.23000002f, 1.97000003f, 0.0400000028f, -0.305000007f },
	{ 0.488000005f, -1.22850001f, 1.94400001f, 0.0530000031f, -0.292250007f },
	{ 0.464399993f, -1.22580004f, 1.90719998f, 0.0414000005f, -0.281300008f },
	{ 0.459951997f, -1.21531403f, 1.89957595f, 0.043312002f, -0.287329018f },
};
/* sgd_dampening: SGD(lr=[0.1, 0.1, 0.1, 0.1], momentum=0.9, dampening=0.5) */
static const float want_sgd_dampening[4][5] = {
	{ 0.49000001f, -1.23000002f, 1.97000003f, 0.0400000028f, -0.305000007f },
	{ 0.483500004f, -1.21950006f, 1.93050003f, 0.0710000023f, -0.294499993f },
	{ 0.467649996f, -1.21005011f, 1.89995003f, 0.0813999996f, -0.291049987f },
	{ 0.452885002f, -1.17654514f, 1.86995506f, 0.100759998f, -0.307944983f },
};
/* sgd_nesterov: SGD(lr=[0.1, 0.1, 0.1, 0.1], momentum=0.9, nesterov=True) */
static const float want_sgd_nesterov[4][5] = {
	{ 0.481000006f, -1.21200001f, 1.94299996f, 0.0759999976f, -0.309500009f },
	{ 0.4824f, -1.22430003f, 1.87119997f, 0.0893999934f, -0.256550014f },
	{ 0.441159993f, -1.22187006f, 1.84807992f, 0.0439599939f, -0.258695006f },
	{ 0.420143992f, -1.12468302f, 1.80877197f, 0.0725639984f, -0.325825512f },
};
/* sgd_weight_decay: SGD(lr=[0.1, 0.1, 0.1, 0.1], momentum=0.5, weight_decay=0.1) */
static const float want_sgd_weight_decay[4][5] = {
	{ 0.484999985f, -1.21749997f, 1.95000005f, 0.0400000028f, -0.302000016f },
	{ 0.477649987f, -1.20407498f, 1.88050008f, 0.0496000014f, -0.269980013f },
	{ 0.449198484f, -1.18532169f, 1.83694506f, 0.0189040024f, -0.263270199f },
	{ 0.429480761f, -1.11409187f, 1.79179811f, 0.0233669635f, -0.297282606f },
};
/* adam: Adam(lr=[0.1, 0.1, 0.1, 0.1]) */
static const float want_adam[4][5] = {
	{ 0.400000006f, -1.14999998f, 1.89999998f, 0.100000001f, -0.399999976f },
	{ 0.373366296f, -1.1410675f, 1.8008827f, 0.146946818f, -0.337608099f },
	{ 0.307555139f, -1.13416266f, 1.74252212f, 0.133237556f, -0.31620422f },
	{ 0.25116235f, -1.07964444f, 1.68791914f, 0.142881185f, -0.350125909f },
};
/* adam_amsgrad: Adam(lr=[0.1, 0.1, 0.1, 0.1], betas=(0.8, 0.9), amsgrad=True) */
static const float want_adam_amsgrad[4][5] = {
	{ 0.400000006f, -1.14999998f, 1.89999998f, 0.100000001f, -0.399999976f },
	{ 0.378577173f, -1.1468339f, 1.8009454f, 0.142117932f, -0.334446698f },
	{ 0.311226338f, -1.1446023f, 1.74893963f, 0.119143724f, -0.315425307f },
	{ 0.258257419f, -1.08626664f, 1.70190907f, 0.126427308f, -0.357029706f },
};
/* adam_weight_decay: Adam(lr=[0.1, 0.05, 0.1, 0.02], weight_decay=0.1) */
static const float want_adam_weight_decay[4][5] = {
	{ 0.400000036f, -1.14999998f, 1.89999998f, 0.100000001f, -0.399999976f },
	{ 0.369047582f, -1.12067568f, 1.85026753f, 0.122432336f, -0.364823639f },
	{ 0.289473057f, -1.05705917f, 1.76590514f, 0.106504664f, -0.327228367f },
	{ 0.274961293f, -1.04180133f, 1.74909091f, 0.107819661f, -0.331387252f },
};
/* adamw: AdamW(lr=[0.1, 0.1, 0.1, 0.1]) */
static const float want_adamw[4][5] = {
	{ 0.399500012f, -1.14874995f, 1.898f, 0.100000001f, -0.399699986f },
	{ 0.372466803f, -1.13866878f, 1.79698479f, 0.146846816f, -0.3369084f },
	{ 0.306283176f, -1.13062525f, 1.73682725f, 0.132990703f, -0.315167606f },
	{ 0.249584094f, -1.07497644f, 1.68048751f, 0.142501354f, -0.348774135f },
};
/* adamw_amsgrad: AdamW(lr=[0.1, 0.05, 0.1, 0.02], betas=(0.8, 0.9), amsgrad=True, weight_decay=0.5) */
static const float want_adamw_amsgrad[4][5] = {
	{ 0.375f, -1.08749998f, 1.79999995f, 0.100000001f, -0.38499999f },
	{ 0.354913622f, -1.05872941f, 1.70547271f, 0.118558973f, -0.342598349f },
	{ 0.269817114f, -1.00356138f, 1.56819332f, 0.0896568149f, -0.306447029f },
	{ 0.256525159f, -0.981858671f, 1.54310536f, 0.0902169645f, -0.311703444f },
};
/* adadelta: Adadelta(lr=[1.0, 1.0, 1.0, 1.0]) */
static const float want_adadelta[4][5] = {
	{ 0.496839315f, -1.24683809f, 1.99683785f, 0.00316217891f, -0.303155988f },
	{ 0.498923033f, -1.24961114f, 1.99388659f, 0.00202262797f, -0.298743367f },
	{ 0.494618058f, -1.24961114f, 1.99529767f, -0.00106328074f, -0.301126719f },
	{ 0.49431935f, -1.24502504f, 1.99455833f, 0.000983128091f, -0.30629009f },
};
/* adadelta_weight_decay: Adadelta(lr=[1.0, 0.5, 1.0, 2.0], rho=0.8, weight_decay=0.1) */
static const float want_adadelta_weight_decay[4][5] = {
	{ 0.49776417f, -1.24776399f, 1.99776399f, 0.00223603332f, -0.302222222f },
	{ 0.497766793f, -1.24790072f, 1.99664283f, 0.00180953357f, -0.300648302f },
	{ 0.495062888f, -1.24660122f, 1.99599481f, -0.000452775625f, -0.301911563f },
	{ 0.493224114f, -1.2407732f, 1.99289429f, 0.00268164929f, -0.308647007f },
};
/* adagrad: Adagrad(lr=[0.1, 0.1, 0.1, 0.1]) */
static const float want_adagrad[4][5] = {
	{ 0.399999976f, -1.14999998f, 1.89999998f, 0.100000009f, -0.400000036f },
	{ 0.444721341f, -1.21000004f, 1.83598149f, 0.0757464468f, -0.301360667f },
	{ 0.357434183f, -1.21000004f, 1.86078846f, 0.0110314265f, -0.338062882f },
	{ 0.353073984f, -1.12055731f, 1.84847927f, 0.0457158275f, -0.41548869f },
};
/* adagrad_lr_decay: Adagrad(lr=[0.1, 0.1, 0.1, 0.1], lr_decay=0.1, initial_accumulator_value=0.5, weight_decay=0.1) */
static const float want_adagrad_lr_decay[4][5] = {
	{ 0.479248554f, -1.20823801f, 1.94226491f, 0.0492365994f, -0.302827299f },
	{ 0.479509532f, -1.21164393f, 1.90077341f, 0.0375922136f, -0.264367133f },
	{ 0.452470928f, -1.19883263f, 1.89309394f, 0.00455314294f, -0.27428335f },
	{ 0.446924239f, -1.15127778f, 1.87480152f, 0.0213412121f, -0.30722186f },
};
/* rmsprop: RMSprop(lr=[0.01, 0.01, 0.01, 0.01]) */
static const float want_rmsprop[4][5] = {
	{ 0.400000095f, -1.1500001f, 1.9000001f, 0.0999999791f, -0.399999827f },
	{ 0.444901377f, -1.21019304f, 1.83579195f, 0.0756314769f, -0.301347136f },
	{ 0.357427448f, -1.21019304f, 1.86078537f, 0.0105500966f, -0.338213474f },
	{ 0.353035957f, -1.12051535f, 1.84832358f, 0.0455611758f, -0.415932357f },
};
/* rmsprop_momentum: RMSprop(lr=[0.01, 0.01, 0.01, 0.01], momentum=0.9) */
static const float want_rmsprop_momentum[4][5] = {
	{ 0.400000095f, -1.1500001f, 1.89999998f, 0.0999999717f, -0.399999827f },
	{ 0.354901463f, -1.120193f, 1.74579179f, 0.165631443f, -0.391346961f },
	{ 0.226838768f, -1.09336662f, 1.63199794f, 0.159618378f, -0.420425713f },
	{ 0.107190855f, -0.979545176f, 1.51712167f, 0.189217702f, -0.524315476f },
};
/* rmsprop_centered: RMSprop(lr=[0.01, 0.01, 0.01, 0.01], centered=True) */
static const float want_rmsprop_centered[4][5] = {
	{ 0.399496317f, -1.14949632f, 1.8994962f, 0.100503758f, -0.400503606f },
	{ 0.44444114f, -1.20970035f, 1.83464491f, 0.0760716125f, -0.301514477f },
	{ 0.356445909f, -1.20970035f, 1.85979199f, 0.0109865814f, -0.338409364f },
	{ 0.352026403f, -1.1195879f, 1.84723735f, 0.0460087322f, -0.41623804f },
};
/* rmsprop_all: RMSprop(lr=[0.01, 0.005, 0.01, 0.002], alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1) */
static const float want_rmsprop_all[4][5] = {
	{ 0.466666669f, -1.2166667f, 1.9666667f, 0.0333333276f, -0.333333284f },
	{ 0.458720535f, -1.20983601f, 1.94629395f, 0.0374209769f, -0.325125784f },
	{ 0.420373797f, -1.19011188f, 1.92054427f, 0.0196891911f, -0.325492024f },
	{ 0.415185213f, -1.18183231f, 1.91517198f, 0.0202984791f, -0.330389678f },
};

static const double lr_flat_0002[4] = { 0.002, 0.002, 0.002, 0.002 };
static const double lr_flat_001_8[8] = { 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01 };
static const double lr_varied_001_8[8] = { 0.01, 0.005, 0.01, 0.002, 0.01, 0.005, 0.01, 0.002 };
/* adamax: Adamax(lr=[0.002, 0.002, 0.002, 0.002]) */
static const float want_adamax[4][5] = {
	{ 0.497999996f, -1.24800003f, 1.99800003f, 0.00200000009f, -0.302000016f },
	{ 0.497578532f, -1.24784195f, 1.99617362f, 0.00268489565f, -0.301105291f },
	{ 0.496707678f, -1.24774218f, 1.99526656f, 0.00247044489f, -0.300835639f },
	{ 0.496060342f, -1.2471323f, 1.99452531f, 0.00260985666f, -0.301273912f },
};
/* adamax_all: Adamax(lr=[0.01, 0.005, 0.01, 0.002], betas=(0.8, 0.9), weight_decay=0.1) */
static const float want_adamax_all[4][5] = {
	{ 0.49000001f, -1.24000001f, 1.99000001f, 0.0100000007f, -0.310000002f },
	{ 0.487551451f, -1.23777783f, 1.98475921f, 0.0116898157f, -0.307356507f },
	{ 0.481884629f, -1.23293638f, 1.97688961f, 0.00963614788f, -0.305117667f },
	{ 0.48087582f, -1.23198843f, 1.97527277f, 0.0097610401f, -0.305556446f },
};
/* radam: RAdam(lr=[0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01]) */
static const float want_radam[8][5] = {
	{ 0.499000013f, -1.24800003f, 1.99699998f, 0.00400000019f, -0.300500005f },
	{ 0.498789489f, -1.24784207f, 1.99426317f, 0.00536842132f, -0.299157888f },
	{ 0.497918636f, -1.24774241f, 1.99290526f, 0.00494037708f, -0.298753828f },
	{ 0.497271925f, -1.24621785f, 1.99179685f, 0.00521836476f, -0.299630404f },
	{ 0.496538937f, -1.24457717f, 1.99022651f, 0.00640524691f, -0.300415009f },
	{ 0.49642244f, -1.24447691f, 1.9900279f, 0.00646951469f, -0.300412565f },
	{ 0.496218592f, -1.24436593f, 1.98984051f, 0.00645978888f, -0.300442517f },
	{ 0.496000141f, -1.24415469f, 1.98962903f, 0.00649714656f, -0.300573915f },
};
/* radam_all: RAdam(lr=[0.01, 0.005, 0.01, 0.002, 0.01, 0.005, 0.01, 0.002], betas=(0.8, 0.95), eps=1e-06, weight_decay=0.1) */
static const float want_radam_all[8][5] = {
	{ 0.49849999f, -1.24675f, 1.995f, 0.00400000019f, -0.300200015f },
	{ 0.498167068f, -1.24609816f, 1.99264026f, 0.00461000018f, -0.299327731f },
	{ 0.496750265f, -1.24481809f, 1.98944819f, 0.0038936846f, -0.298667282f },
	{ 0.496522456f, -1.24422574f, 1.98885739f, 0.00393419014f, -0.298830718f },
	{ 0.495277107f, -1.24117982f, 1.98529804f, 0.00526520889f, -0.299464613f },
	{ 0.494661093f, -1.24057031f, 1.98443568f, 0.00548724271f, -0.299306393f },
	{ 0.492744952f, -1.23906898f, 1.98248649f, 0.00520107755f, -0.29921037f },
	{ 0.492322475f, -1.23862159f, 1.98202729f, 0.00524003431f, -0.29938671f },
};

/* Runs the reference steps on the 5-element vector and compares with
 * want; then on a wide buffer whose element i repeats element i % 5, stepped
 * as two ranges of one state allocation, which must match exactly.  The
 * second range is above optim.c's parallel threshold and runs on 3 threads,
 * so the split between threads is covered too. */
#define WIDE 100000
#define SPLIT 12347

static void run_steps(const char *name, const struct optim_cfg *cfg, int steps, const double *lrs, const float (*want)[5])
{
	CHECK(optim_cfg_check(cfg) == NULL);
	int k = optim_state_floats(cfg->kind, cfg);
	float p[5], st[5 * 3 + 1];
	float *wp = malloc(WIDE * sizeof *wp), *wg = malloc(WIDE * sizeof *wg); /* (WIDE,) */
	float *wst = malloc((size_t)(WIDE * (k ? k : 1)) * sizeof *wst);         /* (k, WIDE) */
	if (!wp || !wg || !wst) abort();
	struct optim_state_view view = { st, 5 }, lo = { wst, WIDE }, hi = { wst + SPLIT, WIDE };
	for (int i = 0; i < 5; i++) p[i] = p0[i];
	for (int i = 0; i < WIDE; i++) wp[i] = p0[i % 5];
	optim_state_init(cfg, view, 5);
	optim_state_init(cfg, lo, SPLIT);
	optim_state_init(cfg, hi, WIDE - SPLIT);
	int bad_wide = 0;
	for (int s = 0; s < steps; s++) {
		optim_step(cfg, view, p, grads[s % 4], 5, s + 1, lrs[s]);
		for (int i = 0; i < 5; i++) {
			double tol = 1e-6 * fmax(fabs((double)want[s][i]), 1.0);
			if (!(fabs((double)p[i] - want[s][i]) <= tol))
				fprintf(stderr, "%s: step %d element %d\n", name, s + 1, i);
			CHECK_NEAR(p[i], want[s][i], tol);
		}
		for (int i = 0; i < WIDE; i++) wg[i] = grads[s % 4][i % 5];
		int threads = omp_get_max_threads();
		omp_set_num_threads(3);
		optim_step(cfg, lo, wp, wg, SPLIT, s + 1, lrs[s]);
		optim_step(cfg, hi, wp + SPLIT, wg + SPLIT, WIDE - SPLIT, s + 1, lrs[s]);
		omp_set_num_threads(threads);
		for (int i = 0; i < WIDE; i++) bad_wide += wp[i] != p[i % 5];
	}
	if (bad_wide) fprintf(stderr, "%s: %d wide elements differ from the 5-element run\n", name, bad_wide);
	CHECK(bad_wide == 0);
	free(wp);
	free(wg);
	free(wst);
}

static void run_case(const char *name, const struct optim_cfg *cfg, const double lrs[4], const float want[4][5])
{
	run_steps(name, cfg, 4, lrs, want);
}

static void test_sgd(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_SGD);
	c.lr = 0.1;
	run_case("sgd_plain", &c, lr_flat_01, want_sgd_plain);
	c.momentum = 0.9;
	run_case("sgd_momentum", &c, lr_varied_01, want_sgd_momentum);
	c.dampening = 0.5;
	run_case("sgd_dampening", &c, lr_flat_01, want_sgd_dampening);
	c.dampening = 0;
	c.nesterov = 1;
	run_case("sgd_nesterov", &c, lr_flat_01, want_sgd_nesterov);
	c.nesterov = 0;
	c.momentum = 0.5;
	c.weight_decay = 0.1;
	run_case("sgd_weight_decay", &c, lr_flat_01, want_sgd_weight_decay);
}

static void test_adam(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_ADAM);
	run_case("adam", &c, lr_flat_01, want_adam);
	c.beta1 = 0.8;
	c.beta2 = 0.9;
	c.amsgrad = 1;
	run_case("adam_amsgrad", &c, lr_flat_01, want_adam_amsgrad);
	c = optim_cfg_default(OPTIM_ADAM);
	c.weight_decay = 0.1;
	run_case("adam_weight_decay", &c, lr_varied_01, want_adam_weight_decay);
}

static void test_adamw(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_ADAMW);
	run_case("adamw", &c, lr_flat_01, want_adamw);
	c.beta1 = 0.8;
	c.beta2 = 0.9;
	c.amsgrad = 1;
	c.weight_decay = 0.5;
	run_case("adamw_amsgrad", &c, lr_varied_01, want_adamw_amsgrad);
}

static void test_adadelta(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_ADADELTA);
	run_case("adadelta", &c, lr_flat_1, want_adadelta);
	c.rho = 0.8;
	c.weight_decay = 0.1;
	run_case("adadelta_weight_decay", &c, lr_varied_1, want_adadelta_weight_decay);
}

static void test_adagrad(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_ADAGRAD);
	run_case("adagrad", &c, lr_flat_01, want_adagrad);
	c.lr_decay = 0.1;
	c.initial_accumulator_value = 0.5;
	c.weight_decay = 0.1;
	run_case("adagrad_lr_decay", &c, lr_flat_01, want_adagrad_lr_decay);
}

static void test_rmsprop(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_RMSPROP);
	run_case("rmsprop", &c, lr_flat_001, want_rmsprop);
	c.momentum = 0.9;
	run_case("rmsprop_momentum", &c, lr_flat_001, want_rmsprop_momentum);
	c.momentum = 0;
	c.centered = 1;
	run_case("rmsprop_centered", &c, lr_flat_001, want_rmsprop_centered);
	c.alpha = 0.9;
	c.momentum = 0.5;
	c.weight_decay = 0.1;
	run_case("rmsprop_all", &c, lr_varied_001, want_rmsprop_all);
}

static void test_adamax(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_ADAMAX);
	run_case("adamax", &c, lr_flat_0002, want_adamax);
	c.beta1 = 0.8;
	c.beta2 = 0.9;
	c.weight_decay = 0.1;
	run_case("adamax_all", &c, lr_varied_001, want_adamax_all);
}

static void test_radam(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_RADAM);
	run_steps("radam", &c, 8, lr_flat_001_8, want_radam);
	c.beta1 = 0.8;
	c.beta2 = 0.95;
	c.eps = 1e-6;
	c.weight_decay = 0.1;
	run_steps("radam_all", &c, 8, lr_varied_001_8, want_radam_all);
}

static void test_defaults(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_ADAM);
	CHECK(c.lr == 1e-3 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0);
	c = optim_cfg_default(OPTIM_ADAMW);
	CHECK(c.lr == 1e-3 && c.weight_decay == 1e-2 && !c.amsgrad);
	c = optim_cfg_default(OPTIM_ADADELTA);
	CHECK(c.lr == 1.0 && c.rho == 0.9 && c.eps == 1e-6);
	c = optim_cfg_default(OPTIM_ADAGRAD);
	CHECK(c.lr == 1e-2 && c.lr_decay == 0 && c.initial_accumulator_value == 0 && c.eps == 1e-10);
	c = optim_cfg_default(OPTIM_RMSPROP);
	CHECK(c.lr == 1e-2 && c.alpha == 0.99 && c.eps == 1e-8 && c.momentum == 0 && !c.centered);
	c = optim_cfg_default(OPTIM_SGD);
	CHECK(c.momentum == 0 && c.dampening == 0 && !c.nesterov && c.weight_decay == 0);
	CHECK(optim_cfg_check(&c) != NULL); /* SGD has no default lr */
	c.lr = 0.1;
	CHECK(optim_cfg_check(&c) == NULL);
	c.nesterov = 1;
	CHECK(optim_cfg_check(&c) != NULL); /* nesterov without momentum */
	c.momentum = 0.9;
	CHECK(optim_cfg_check(&c) == NULL);
	c.dampening = 0.1;
	CHECK(optim_cfg_check(&c) != NULL);
	c = optim_cfg_default(OPTIM_ADAM);
	c.beta2 = 1.0;
	CHECK(optim_cfg_check(&c) != NULL);
	c = optim_cfg_default(OPTIM_ADADELTA);
	c.rho = 1.0;
	CHECK(optim_cfg_check(&c) == NULL);
	c.lr = -1;
	CHECK(optim_cfg_check(&c) != NULL);
	CHECK_STR(optim_kind_name(OPTIM_ADAMW), "adamw");
	CHECK_STR(optim_kind_name(OPTIM_RMSPROP), "rmsprop");
	c = optim_cfg_default(OPTIM_ADAMAX);
	CHECK(c.lr == 2e-3 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0);
	c = optim_cfg_default(OPTIM_RADAM);
	CHECK(c.lr == 1e-3 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0);
	c.beta1 = 1.0;
	CHECK(optim_cfg_check(&c) != NULL);
	CHECK_STR(optim_kind_name(OPTIM_RADAM), "radam");
}

static void test_state_floats(void)
{
	struct optim_cfg c = optim_cfg_default(OPTIM_SGD);
	CHECK(optim_state_floats(OPTIM_SGD, &c) == 0);
	c.momentum = 0.9;
	CHECK(optim_state_floats(OPTIM_SGD, &c) == 1);
	CHECK(optim_state_floats(OPTIM_ADAM, NULL) == 2);
	CHECK(optim_state_floats(OPTIM_ADAMW, NULL) == 2);
	c = optim_cfg_default(OPTIM_ADAMW);
	c.amsgrad = 1;
	CHECK(optim_state_floats(OPTIM_ADAMW, &c) == 3);
	CHECK(optim_state_floats(OPTIM_ADADELTA, NULL) == 2);
	CHECK(optim_state_floats(OPTIM_ADAGRAD, NULL) == 1);
	c = optim_cfg_default(OPTIM_RMSPROP);
	CHECK(optim_state_floats(OPTIM_RMSPROP, &c) == 1);
	c.momentum = 0.5;
	CHECK(optim_state_floats(OPTIM_RMSPROP, &c) == 2);
	c.centered = 1;
	CHECK(optim_state_floats(OPTIM_RMSPROP, &c) == 3);
	CHECK(optim_state_floats(OPTIM_ADAMAX, NULL) == 2);
	CHECK(optim_state_floats(OPTIM_RADAM, NULL) == 2);

	/* Adagrad's accumulator starts at initial_accumulator_value, the rest at 0 */
	float st[6] = { 9, 9, 9, 9, 9, 9 };
	c = optim_cfg_default(OPTIM_ADAGRAD);
	c.initial_accumulator_value = 0.25;
	optim_state_init(&c, (struct optim_state_view){ st, 3 }, 3);
	CHECK(st[0] == 0.25f && st[2] == 0.25f && st[3] == 9);
	c = optim_cfg_default(OPTIM_ADAM);
	optim_state_init(&c, (struct optim_state_view){ st + 1, 3 }, 2);
	CHECK(st[0] == 0.25f && st[1] == 0 && st[2] == 0 && st[4] == 0 && st[5] == 0 && st[3] == 9);
}

/* Schedules: the lr during epochs 0..9 (read before each scheduler.step()),
 * base lr 0.1.  Produced by:
 *
 * import torch
 * from torch.optim import lr_scheduler as L
 * def lrs(make):
 *     opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
 *     s = make(opt); out = []
 *     for e in range(10):
 *         out.append(opt.param_groups[0]['lr']); opt.step(); s.step()
 *     print(", ".join(repr(x) for x in out))
 *
 * with make as in the comment above each table. */
static void check_sched(const char *name, const struct sched_cfg *c, const double want[10])
{
	CHECK(sched_cfg_check(c) == NULL);
	for (int t = 0; t < 10; t++) {
		double got = sched_lr_at(c, 0.1, t), tol = 1e-12 * fabs(want[t]) + 1e-18;
		if (!(fabs(got - want[t]) <= tol)) fprintf(stderr, "%s: epoch %d\n", name, t);
		CHECK_NEAR(got, want[t], tol);
	}
}

static void test_sched_step(void)
{
	/* L.StepLR(o, step_size=3) */
	static const double want[10] = { 0.1, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002,
		0.010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002,
		0.00010000000000000003 };
	struct sched_cfg c = sched_cfg_default(SCHED_STEP);
	CHECK(sched_cfg_check(&c) != NULL); /* step_size is required */
	c.step_size = 3;
	check_sched("step", &c, want);
}

static void test_sched_multistep(void)
{
	/* L.MultiStepLR(o, milestones=[2, 5, 5, 8], gamma=0.5) */
	static const double want[10] = { 0.1, 0.1, 0.05, 0.05, 0.05, 0.0125, 0.0125, 0.0125, 0.00625, 0.00625 };
	struct sched_cfg c = sched_cfg_default(SCHED_MULTISTEP);
	c.gamma = 0.5;
	c.n_milestones = 4;
	c.milestones[0] = 2;
	c.milestones[1] = 5;
	c.milestones[2] = 5;
	c.milestones[3] = 8;
	check_sched("multistep", &c, want);
}

static void test_sched_exponential(void)
{
	/* L.ExponentialLR(o, gamma=0.9) */
	static const double want[10] = { 0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002,
		0.06561000000000002, 0.05904900000000002, 0.05314410000000002, 0.04782969000000002,
		0.043046721000000024, 0.03874204890000002 };
	struct sched_cfg c = sched_cfg_default(SCHED_EXPONENTIAL);
	CHECK(sched_cfg_check(&c) != NULL); /* gamma is required */
	c.gamma = 0.9;
	check_sched("exponential", &c, want);
}

static void test_sched_cosine(void)
{
	/* L.CosineAnnealingLR(o, T_max=10, eta_min=0.001) */
	static const double want[10] = { 0.1, 0.09757729755661011, 0.0905463412215599, 0.07959536998847742,
		0.0657963412215599, 0.0505, 0.03520365877844011, 0.02140463001152259, 0.010453658778440109,
		0.0034227024433899004 };
	/* L.CosineAnnealingLR(o, T_max=6): past T_max the lr rises again */
	static const double want_past[10] = { 0.1, 0.09330127018922195, 0.07500000000000001, 0.05,
		0.025000000000000012, 0.006698729810778065, 0.0, 0.006698729810778065, 0.025, 0.05000000000000004 };
	/* L.SequentialLR(o, [L.LinearLR(o, start_factor=1/3, end_factor=1.0, total_iters=2),
	 *     L.CosineAnnealingLR(o, T_max=7, eta_min=0.001)], milestones=[3]):
	 * a warmup of 3 in front of a cosine over the remaining 7 */
	static const double want_warm[10] = { 0.03333333333333333, 0.06666666666666667, 0.1, 0.1,
		0.09509795896116975, 0.08136274519200731, 0.061514786230837566, 0.03948521376916245,
		0.019637254807992697, 0.005902041038830259 };
	struct sched_cfg c = sched_cfg_default(SCHED_COSINE);
	CHECK(sched_cfg_check(&c) != NULL); /* t_max is required */
	c.t_max = 10;
	c.eta_min = 0.001;
	check_sched("cosine", &c, want);
	c.t_max = 6;
	c.eta_min = 0;
	check_sched("cosine_past_t_max", &c, want_past);
	c.t_max = 10;
	c.eta_min = 0.001;
	c.warmup = 3;
	check_sched("cosine_warmup", &c, want_warm);
	c.warmup = 10;
	CHECK(sched_cfg_check(&c) != NULL); /* nothing left to anneal */
}

static void test_sched_factor(void)
{
	/* L.ConstantLR(o), and (o, factor=0.5, total_iters=3) */
	static const double want[10] = { 0.03333333333333333, 0.03333333333333333, 0.03333333333333333, 0.03333333333333333,
		0.03333333333333333, 0.1, 0.1, 0.1, 0.1, 0.1 };
	static const double want_half[10] = { 0.05, 0.05, 0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1 };
	struct sched_cfg c = sched_cfg_default(SCHED_CONSTANT_LR);
	check_sched("constant_lr", &c, want);
	c.factor = 0.5;
	c.total_iters = 3;
	check_sched("constant_lr 0.5 3", &c, want_half);
	c.factor = 0;
	CHECK(sched_cfg_check(&c) != NULL); /* ConstantLR would divide by it */
	c.factor = 0.5;
	c.total_iters = 0;
	CHECK(sched_cfg_check(&c) != NULL);
}

static void test_sched_linear(void)
{
	/* L.LinearLR(o), and (o, start_factor=1.0, end_factor=0.1, total_iters=4) */
	static const double want[10] = { 0.03333333333333333, 0.04666666666666667, 0.060000000000000005, 0.07333333333333335,
		0.08666666666666668, 0.1, 0.1, 0.1, 0.1, 0.1 };
	static const double want_down[10] = { 0.1, 0.07750000000000001, 0.055000000000000014, 0.03250000000000001, 0.01,
		0.01, 0.01, 0.01, 0.01, 0.01 };
	struct sched_cfg c = sched_cfg_default(SCHED_LINEAR);
	check_sched("linear_lr", &c, want);
	c.start_factor = 1.0;
	c.end_factor = 0.1;
	c.total_iters = 4;
	check_sched("linear_lr down", &c, want_down);
	c.start_factor = 0;
	CHECK(sched_cfg_check(&c) != NULL);
}

static void test_sched_polynomial(void)
{
	/* L.PolynomialLR(o), and (o, total_iters=6, power=2.0) */
	static const double want[10] = { 0.1, 0.08000000000000002, 0.060000000000000005, 0.04000000000000001, 0.02, 0.0,
		0.0, 0.0, 0.0, 0.0 };
	static const double want_sq[10] = { 0.1, 0.06944444444444446, 0.04444444444444447, 0.02500000000000001,
		0.011111111111111117, 0.0027777777777777775, 0.0, 0.0, 0.0, 0.0 };
	struct sched_cfg c = sched_cfg_default(SCHED_POLYNOMIAL);
	check_sched("polynomial_lr", &c, want);
	c.total_iters = 6;
	c.power = 2;
	check_sched("polynomial_lr squared", &c, want_sq);
	c.power = -1;
	CHECK(sched_cfg_check(&c) != NULL);
}

static void test_sched_restarts(void)
{
	/* L.CosineAnnealingWarmRestarts(o, T_0=3), and (o, T_0=2, T_mult=2,
	 * eta_min=0.001): periods of 2, 4 and 8 */
	static const double want[10] = { 0.1, 0.07500000000000001, 0.025000000000000012, 0.1, 0.07500000000000001,
		0.025000000000000012, 0.1, 0.07500000000000001, 0.025000000000000012, 0.1 };
	static const double want_mult[10] = { 0.1, 0.0505, 0.1, 0.0855017856687341, 0.0505, 0.0154982143312659, 0.1,
		0.0962320368593087, 0.0855017856687341, 0.06944282990207196 };
	struct sched_cfg c = sched_cfg_default(SCHED_COSINE_RESTARTS);
	CHECK(sched_cfg_check(&c) != NULL); /* t_0 is required */
	c.t_0 = 3;
	check_sched("cosine_warm_restarts", &c, want);
	c.t_0 = 2;
	c.t_mult = 2;
	c.eta_min = 0.001;
	check_sched("cosine_warm_restarts t_mult 2", &c, want_mult);
	/* the 15th tick (t = 14) starts the fourth period, of 16 */
	CHECK(sched_lr_at(&c, 0.1, 14) == 0.1);
	CHECK_NEAR(sched_lr_at(&c, 0.1, 15), 0.09904887137995991, 1e-15);
	/* far out, the periods stop growing before they overflow */
	c.t_mult = 1000000;
	CHECK(sched_lr_at(&c, 0.1, (int64_t)1 << 40) >= 0.001);
}

static void test_sched_unit(void)
{
	struct sched_cfg c = sched_cfg_default(SCHED_STEP);
	c.step_size = 2;
	CHECK(sched_lr(&c, 1.0, 3, 100) == sched_lr_at(&c, 1.0, 3)); /* per epoch: the step is ignored */
	c.unit = SCHED_PER_STEP;
	CHECK(sched_lr(&c, 1.0, 3, 100) == sched_lr_at(&c, 1.0, 100));
	CHECK(sched_lr_at(&c, 1.0, 100) != sched_lr_at(&c, 1.0, 3));
	c = sched_cfg_default(SCHED_CONSTANT);
	CHECK(sched_cfg_check(&c) == NULL);
	CHECK(sched_lr(&c, 0.25, 7, 70000) == 0.25);
	CHECK_STR(sched_kind_name(SCHED_MULTISTEP), "multistep");
}

/* OneCycleLR against PyTorch 1.13's param_groups before each step:
 *
 * OneCycleLR(SGD(p, lr=0.1, momentum=0.9), max_lr=1.0, total_steps=10, pct_start=0.25)
 * OneCycleLR(Adam(p, lr=0.1), max_lr=1.0, total_steps=9, three_phase=True,
 *            anneal_strategy='linear', base_momentum=0.8, max_momentum=0.9,
 *            div_factor=10, final_div_factor=100)        (betas[0]) */
static void test_sched_one_cycle(void)
{
	static const double lr1[] = { 0.040000000000000036, 0.7599999999999999, 0.9890738440717014, 0.904508879153485, 0.750001,
				      0.5522660225769003, 0.3454941208465151, 0.16543803508178376, 0.04323109826961479, 4e-06 };
	static const double m1[] = { 0.95, 0.875, 0.8510926199633096, 0.8595491502812526, 0.875, 0.8947735768366173, 0.9154508497187474,
				     0.9334565303179428, 0.94567727288213, 0.95 };
	static const double lr2[] = { 0.1, 0.6294117647058824, 0.8411764705882352, 0.3117647058823527, 0.08708695652173912,
				      0.06556521739130435, 0.04404347826086956, 0.022521739130434787, 0.0010000000000000009 };
	static const double m2[] = { 0.9, 0.8411764705882353, 0.8176470588235295, 0.8764705882352941, 0.9, 0.9, 0.9, 0.9, 0.9 };
	struct sched_cfg c = sched_cfg_default(SCHED_ONE_CYCLE);
	c.max_lr = 1.0, c.total = 10, c.pct_start = 0.25, c.div_factor = 25, c.final_div_factor = 1e4;
	c.base_momentum = 0.85, c.max_momentum = 0.95, c.cycle_momentum = true, c.unit = SCHED_PER_STEP;
	CHECK(sched_cfg_check(&c) == NULL);
	for (int t = 0; t < 10; t++) {
		CHECK(fabs(sched_lr(&c, 0.1, 0, t) - lr1[t]) <= 1e-15 * lr1[t] + 1e-18);
		CHECK(fabs(sched_momentum_at(&c, t) - m1[t]) <= 1e-15);
	}
	c.total = 9, c.pct_start = 0.3, c.three_phase = true, c.anneal_linear = true, c.base_momentum = 0.8, c.max_momentum = 0.9;
	c.div_factor = 10, c.final_div_factor = 100;
	for (int t = 0; t < 9; t++) {
		CHECK(fabs(sched_lr_at(&c, 0.1, t) - lr2[t]) <= 1e-14 * lr2[t]);
		CHECK(fabs(sched_momentum_at(&c, t) - m2[t]) <= 1e-15);
	}
	c.total = 0;
	CHECK(sched_cfg_check(&c) != NULL);
}

/* ReduceLROnPlateau against PyTorch 1.13's rates after each step(metric):
 *
 * s = ReduceLROnPlateau(SGD(p, lr=1.0), mode='max', threshold=0.1, patience=1,
 *                       factor=0.5, min_lr=0.1, cooldown=1)
 * for m in [1, 1.05, 1.2, nan, 1.25, 1.0, 0.5 (x7), 3.0]: s.step(m)
 * -> 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.125
 * s = ReduceLROnPlateau(SGD(p, lr=1.5e-8), patience=0, factor=0.5, threshold=1,
 *                       threshold_mode='abs'), metrics 1, 0.5, 0.2, -1, -1:
 * -> 1.5e-8 throughout (each cut is below eps 1e-8)
 * and with min_lr the rate stops there. */
static void test_sched_plateau(void)
{
	struct sched_cfg c = sched_cfg_default(SCHED_PLATEAU);
	c.mode_max = true, c.threshold = 0.1, c.patience = 1, c.factor = 0.5, c.min_lr = 0.1, c.cooldown = 1, c.eps = 1e-8;
	CHECK(sched_cfg_check(&c) == NULL);
	struct sched_plateau s = sched_plateau_start(&c, 1.0);
	CHECK(s.best == -INFINITY && s.lr == 1.0);
	const double m[] = { 1, 1.05, 1.2, NAN, 1.25, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 3.0 };
	const double want[] = { 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.125 };
	for (int i = 0; i < 14; i++) {
		bool changed = sched_plateau_step(&c, &s, m[i]);
		CHECK(s.lr == want[i]);
		CHECK(changed == (i > 0 && want[i] != want[i - 1]));
	}
	CHECK(s.epochs == 14 && s.best == 3.0);
	c = sched_cfg_default(SCHED_PLATEAU);
	c.patience = 0, c.factor = 0.5, c.threshold = 1, c.threshold_abs = true, c.eps = 1e-8;
	s = sched_plateau_start(&c, 1.5e-8);
	const double m2[] = { 1, 0.5, 0.2, -1, -1 };
	for (int i = 0; i < 5; i++)
		CHECK(!sched_plateau_step(&c, &s, m2[i]) && s.lr == 1.5e-8);
	/* min_lr holds the rate */
	c = sched_cfg_default(SCHED_PLATEAU);
	c.patience = 0, c.factor = 0.1, c.min_lr = 0.05, c.eps = 1e-8;
	s = sched_plateau_start(&c, 1.0);
	for (int i = 0; i < 5; i++)
		sched_plateau_step(&c, &s, 1.0);
	CHECK(s.lr == 0.05);
	c.factor = 1;
	CHECK(sched_cfg_check(&c) != NULL);
}

/* Clipping reference: two parameters' gradients, then
 * torch.nn.utils.clip_grad_norm_([a, b], max_norm) for max_norm 1, 2.5, 100:
 *
 * import torch
 * a = torch.tensor([0.3, -1.2, 2.5, 0.7, -0.05], requires_grad=True)
 * b = torch.tensor([[1.5, -0.25, 0.0], [0.8, -2.2, 0.6]], requires_grad=True)
 * a.grad = a.detach().clone(); b.grad = b.detach().clone()
 * t = torch.nn.utils.clip_grad_norm_([a, b], max_norm)
 * print("%.9g" % t.item(), a.grad.tolist(), b.grad.flatten().tolist())
 */
struct two_grads { float *a, *b; /* (5,), (6,) */ };

static void scale_two(void *ctx, float coef)
{
	struct two_grads *g = ctx;
	optim_scale(g->a, 5, coef);
	optim_scale(g->b, 6, coef);
}

static void test_clip(void)
{
	static const float ga[5] = { 0.3f, -1.2f, 2.5f, 0.7f, -0.05f }, gb[6] = { 1.5f, -0.25f, 0.0f, 0.8f, -2.2f, 0.6f };
	static const double max_norms[3] = { 1.0, 2.5, 100.0 };
	static const float want[3][11] = {
		{ 0.0740233064f, -0.296093225f, 0.616860867f, 0.172721043f, -0.012337218f,
		  0.370116532f, -0.0616860874f, 0.0f, 0.197395489f, -0.54283756f, 0.148046613f },
		{ 0.185058266f, -0.740233064f, 1.54215217f, 0.431802601f, -0.0308430437f,
		  0.9252913f, -0.154215217f, 0.0f, 0.493488699f, -1.35709393f, 0.370116532f },
		{ 0.300000012f, -1.20000005f, 2.5f, 0.699999988f, -0.0500000007f,
		  1.5f, -0.25f, 0.0f, 0.800000012f, -2.20000005f, 0.600000024f },
	};
	for (int k = 0; k < 3; k++) {
		float a[5], b[6];
		for (int i = 0; i < 5; i++) a[i] = ga[i];
		for (int i = 0; i < 6; i++) b[i] = gb[i];
		struct two_grads g = { a, b };
		/* partial sums over ranges, as shards would all-reduce them */
		double ss = optim_sumsq(a, 2) + optim_sumsq(a + 2, 3) + optim_sumsq(b, 6);
		double total = optim_clip_grad_norm(ss, max_norms[k], scale_two, &g);
		CHECK_NEAR(total, 4.05277681, 1e-6 * 4.05277681);
		for (int i = 0; i < 11; i++) {
			float got = i < 5 ? a[i] : b[i - 5];
			CHECK_NEAR(got, want[k][i], 1e-6 * fmax(fabs((double)want[k][i]), 1e-1));
		}
	}
	CHECK(optim_clip_coef(3.0, 100.0) == 1.0f);
	CHECK(optim_clip_coef(4.0, 1.0) < 0.25f && optim_clip_coef(4.0, 1.0) > 0.2499999f);
}

/* optim_sumsq: close to an exact sum, and the same bits whatever the thread
 * count, since the chunking depends on n alone. */
static void test_sumsq(void)
{
	enum { N = 1000003 };
	float *x = malloc(N * sizeof *x); /* (N,) */
	if (!x) abort();
	long double exact = 0;
	for (int i = 0; i < N; i++) {
		x[i] = (float)((i % 1000) - 500) * 1e-3f + 1e-7f * (float)(i % 7);
		exact += (long double)x[i] * x[i];
	}
	int threads = omp_get_max_threads();
	omp_set_num_threads(1);
	double one = optim_sumsq(x, N);
	omp_set_num_threads(3);
	double three = optim_sumsq(x, N);
	omp_set_num_threads(threads);
	CHECK(one == three);
	CHECK_NEAR(one, (double)exact, 1e-12 * (double)exact);
	CHECK(optim_sumsq(x, 0) == 0);
	CHECK_NEAR(optim_sumsq(x, 3), (double)x[0] * x[0] + (double)x[1] * x[1] + (double)x[2] * x[2], 1e-15);
	free(x);
}

/* Init statistics over NS draws, five standard errors each: with a fixed
 * seed the outcome is fixed, and a 1% error in a scale is ~7 errors. */
enum { NS = 1000000 };

static void uniform_stats(const float *x, int64_t n, double b)
{
	double s = 0, s2 = 0, lo = 0, hi = 0;
	int out = 0;
	for (int64_t i = 0; i < n; i++) {
		s += x[i];
		s2 += (double)x[i] * x[i];
		out += !(fabs(x[i]) <= b * (1 + 1e-7));
		lo = fmin(lo, x[i]);
		hi = fmax(hi, x[i]);
	}
	double mean = s / (double)n, var = s2 / (double)n - mean * mean;
	CHECK(out == 0);
	CHECK(lo < -0.999 * b && hi > 0.999 * b);
	CHECK_NEAR(mean, 0.0, 5 * b / sqrt(3.0 * (double)n));          /* sd of U(-b,b) is b/sqrt(3) */
	CHECK_NEAR(var, b * b / 3, 5 * b * b * sqrt(4.0 / 45.0 / (double)n)); /* Var(x^2) = 4b^4/45 */
}

static void test_init_linear_conv(void)
{
	float *x = malloc(NS * sizeof *x); /* (NS,) */
	if (!x) abort();
	struct init_gen g;
	init_gen_seed(&g, 1234);
	CHECK_NEAR(init_kaiming_bound(100, sqrt(5.0)), 0.1, 1e-15);
	CHECK_NEAR(init_kaiming_bound(50, 0.0), 0.34641016151377546, 1e-15); /* math.sqrt(6/50) */
	struct init_param w = { .role = INIT_LINEAR_WEIGHT, .fan_in = init_fan_in_linear(100) };
	init_fill(&w, &g, x, NS);
	uniform_stats(x, NS, 0.1);
	CHECK(init_fan_in_conv(16, 2, 3, 3) == 72);
	struct init_param cw = { .role = INIT_CONV_WEIGHT, .fan_in = init_fan_in_conv(16, 2, 3, 3) };
	init_fill(&cw, &g, x, NS);
	uniform_stats(x, NS, 0.11785113019775793); /* 1 / math.sqrt(72) */
	struct init_param bias = { .role = INIT_CONV_BIAS, .fan_in = 72 };
	init_fill(&bias, &g, x, NS);
	uniform_stats(x, NS, 0.11785113019775793);
	bias.role = INIT_LINEAR_BIAS;
	bias.fan_in = 0;
	init_fill(&bias, &g, x, 1000);
	int nonzero = 0;
	for (int i = 0; i < 1000; i++) nonzero += x[i] != 0;
	CHECK(nonzero == 0);
	free(x);
}

/* PyTorch 1.13: torch.manual_seed(1); Net() (the FSDP MNIST example's),
 * its tensors drawn in order; the uniform ones bit for bit. */
static void test_init_torch_cnn(void)
{
	static const struct { enum init_role role; int64_t fan_in, n; } t[8] = {
		{ INIT_CONV_WEIGHT, 9, 288 }, { INIT_CONV_BIAS, 9, 32 }, { INIT_CONV_WEIGHT, 288, 18432 }, { INIT_CONV_BIAS, 288, 64 },
		{ INIT_LINEAR_WEIGHT, 9216, 1179648 }, { INIT_LINEAR_BIAS, 9216, 128 }, { INIT_LINEAR_WEIGHT, 128, 1280 },
		{ INIT_LINEAR_BIAS, 128, 10 },
	};
	float *x = malloc(1179648 * sizeof *x);
	if (!x) abort();
	struct init_gen g;
	init_gen_seed(&g, 1);
	for (int k = 0; k < 8; k++) {
		struct init_param p = { .role = t[k].role, .fan_in = t[k].fan_in };
		init_fill(&p, &g, x, t[k].n);
		if (k == 0)
			CHECK(x[0] == 0.171754405f && x[1] == -0.147126079f && x[2] == -0.0646204948f);
		if (k == 4)
			CHECK(x[1179647] == 0.000659355312f);
		if (k == 7)
			CHECK(x[9] == 0.0502154492f);
	}
	/* drawing a tensor without keeping it leaves the generator where filling does */
	init_gen_seed(&g, 1);
	for (int k = 0; k < 7; k++) {
		struct init_param p = { .role = t[k].role, .fan_in = t[k].fan_in };
		init_fill(&p, &g, NULL, t[k].n);
	}
	struct init_param last = { .role = INIT_LINEAR_BIAS, .fan_in = 128 };
	init_fill(&last, &g, x, 10);
	CHECK(x[9] == 0.0502154492f);
	free(x);
}

static void near_all(const float *x, const float *want, int n, float tol)
{
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += !(fabsf(x[i] - want[i]) <= tol * fmaxf(1.0f, fabsf(want[i])));
	CHECK(bad == 0);
}

/* PyTorch 1.13's normal_: below 16 elements per element in double, the
 * second sample of each pair kept for the next call (even the next
 * tensor's); from 16 in blocks of 16 floats, a partial block drawn again. */
static void test_init_torch_normal(void)
{
	/* torch.manual_seed(3); Embedding(3, 4); Embedding(1, 5); Linear(2, 2) */
	static const float a[12] = { 0.803276062f, 0.174833387f, 0.0889780968f, -0.613718033f, 0.0461824499f, -1.36825919f,
				     0.337495089f, 1.01111591f,  -1.43517935f,  0.977431774f,  0.522049963f, 1.23791671f };
	static const float b[5] = { -0.864635587f, 0.298960835f, 0.419218659f, -0.0798543245f, 0.926410854f };
	static const float c[4] = { -0.185790971f, -0.700991094f, -0.331058592f, 0.0136030633f };
	float x[40];
	struct init_gen g;
	init_gen_seed(&g, 3);
	struct init_param e = { .role = INIT_EMBEDDING, .row_len = 4, .padding_idx = -1 };
	init_fill(&e, &g, x, 12);
	near_all(x, a, 12, 1e-6f);
	e.row_len = 5;
	init_fill(&e, &g, x, 5);
	near_all(x, b, 5, 1e-6f);
	struct init_param w = { .role = INIT_LINEAR_WEIGHT, .fan_in = 2 };
	init_fill(&w, &g, x, 4);
	CHECK(x[0] == c[0] && x[1] == c[1] && x[2] == c[2] && x[3] == c[3]);
	/* torch.manual_seed(5); Embedding(5, 7, padding_idx=2): 35 elements */
	static const float d[35] = {
		1.84232986f,   0.518887162f, -1.71192133f, -1.7013793f,  2.01941943f,  -0.268614441f, -0.130717501f,
		-1.43741381f,  0.39076823f,  -0.0189677607f, -1.35268736f, -0.730817795f, 0.987922251f, -0.419407934f,
		0, 0, 0, 0, 0, 0, 0,
		0.2879498f,    0.936796486f, -2.40313506f, 0.818342566f, -0.66327709f, 0.265265822f, -1.63911867f,
		-1.81530511f,  -0.206628591f, -0.525951207f, -1.69773293f, -1.03646708f, 0.670461774f, -0.177704588f,
	};
	init_gen_seed(&g, 5);
	struct init_param pe = { .role = INIT_EMBEDDING, .row_len = 7, .padding_idx = 2 };
	init_fill(&pe, &g, x, 35);
	near_all(x, d, 35, 1e-5f); /* float log, sin and cos: rounding may differ */
	int pad_nonzero = 0;
	for (int i = 14; i < 21; i++) pad_nonzero += x[i] != 0;
	CHECK(pad_nonzero == 0);
}

static void test_init_embedding(void)
{
	enum { DIM = 64, PAD = 7 };
	float *x = malloc(NS * sizeof *x); /* (NS / DIM, DIM) */
	if (!x) abort();
	struct init_gen g;
	init_gen_seed(&g, 42);
	struct init_param e = { .role = INIT_EMBEDDING, .row_len = DIM, .padding_idx = PAD };
	init_fill(&e, &g, x, NS);
	int pad_nonzero = 0;
	double s = 0, s2 = 0;
	int64_t within = 0, n = 0;
	for (int64_t i = 0; i < NS; i++) {
		if (i / DIM == PAD) {
			pad_nonzero += x[i] != 0;
			continue;
		}
		s += x[i];
		s2 += (double)x[i] * x[i];
		within += fabs(x[i]) < 1;
		n++;
	}
	double mean = s / (double)n, var = s2 / (double)n - mean * mean, frac = (double)within / (double)n;
	CHECK(pad_nonzero == 0);
	CHECK_NEAR(mean, 0.0, 5 / sqrt((double)n));
	CHECK_NEAR(var, 1.0, 5 * sqrt(2.0 / (double)n));
	/* P(|z| < 1) = math.erf(1 / math.sqrt(2)) */
	CHECK_NEAR(frac, 0.6826894921370859, 5 * sqrt(0.6827 * 0.3173 / (double)n));
	free(x);
}

static void test_init_constants(void)
{
	float x[300];
	static const enum init_role ones[2] = { INIT_NORM_WEIGHT, INIT_RUNNING_VAR };
	static const enum init_role zeros[2] = { INIT_NORM_BIAS, INIT_RUNNING_MEAN };
	struct init_gen g, h;
	init_gen_seed(&g, 1);
	init_gen_seed(&h, 1);
	for (int r = 0; r < 2; r++) {
		struct init_param p = { .role = ones[r] }, q = { .role = zeros[r] };
		int bad = 0;
		init_fill(&p, &g, x, 300);
		for (int i = 0; i < 300; i++) bad += x[i] != 1.0f;
		init_fill(&q, &g, x, 300);
		for (int i = 0; i < 300; i++) bad += x[i] != 0.0f;
		CHECK(bad == 0);
	}
	/* constants draw nothing, as torch's ones_ and zeros_ */
	CHECK(mt19937_next(&g.mt) == mt19937_next(&h.mt));
}

int main(void)
{
	RUN(test_sgd);
	RUN(test_adam);
	RUN(test_adamw);
	RUN(test_adadelta);
	RUN(test_adagrad);
	RUN(test_rmsprop);
	RUN(test_adamax);
	RUN(test_radam);
	RUN(test_defaults);
	RUN(test_state_floats);
	RUN(test_sched_step);
	RUN(test_sched_plateau);
	RUN(test_sched_one_cycle);
	RUN(test_sched_multistep);
	RUN(test_sched_exponential);
	RUN(test_sched_cosine);
	RUN(test_sched_factor);
	RUN(test_sched_linear);
	RUN(test_sched_polynomial);
	RUN(test_sched_restarts);
	RUN(test_sched_unit);
	RUN(test_clip);
	RUN(test_sumsq);
	RUN(test_init_linear_conv);
	RUN(test_init_embedding);
	RUN(test_init_constants);
	RUN(test_init_torch_cnn);
	RUN(test_init_torch_normal);
	return check_done();
}
