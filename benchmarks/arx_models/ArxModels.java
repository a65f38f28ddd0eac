import java.util.Arrays;
import java.util.List;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXCostBenefitConfiguration;
import org.deidentifier.arx.ARXPopulationModel;
import org.deidentifier.arx.ARXSolverConfiguration;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.DataSubset;
import org.deidentifier.arx.criteria.AverageReidentificationRisk;
import org.deidentifier.arx.criteria.BasicBLikeness;
import org.deidentifier.arx.criteria.DDisclosurePrivacy;
import org.deidentifier.arx.criteria.DPresence;
import org.deidentifier.arx.criteria.EnhancedBLikeness;
import org.deidentifier.arx.criteria.EntropyLDiversity;
import org.deidentifier.arx.criteria.EqualDistanceTCloseness;
import org.deidentifier.arx.criteria.KAnonymity;
import org.deidentifier.arx.criteria.KMap;
import org.deidentifier.arx.criteria.PopulationUniqueness;
import org.deidentifier.arx.criteria.ProfitabilityJournalist;
import org.deidentifier.arx.criteria.ProfitabilityProsecutor;
import org.deidentifier.arx.criteria.PrivacyCriterion;
import org.deidentifier.arx.criteria.RecursiveCLDiversity;
import org.deidentifier.arx.criteria.SampleUniqueness;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness.PopulationUniquenessModel;
import org.deidentifier.arx.metric.Metric;

/**
 * duckanon's benchmark driver for ARX 3.9.2's privacy models beyond k-anonymity (bench_arx.py's model cases).
 *
 *   java -cp CLASSES:ARX_JARS ArxModels CSV DELIM HIERARCHY_PATTERN QI1,QI2,... SENSITIVE SUPPRESSION METRIC REPEATS
 *        MODEL [MODEL ...]
 *
 * MODEL: k:K, basic-beta:BETA, enhanced-beta:BETA, delta-disclosure:DELTA, entropy-l:L[:grassberger],
 * recursive-cl:C:L, t-equal:T (the models over SENSITIVE); average-risk:T, sample-uniqueness:T,
 * population-uniqueness:T:MODEL:STEPS (MODEL dankar, pitman, zayatz or snb; the USA's population); with subset=SUBSET.csv first (records of CSV, same
 * columns and delimiter: the research subset, CSV its population), delta-presence:MIN:MAX and k-map:K (SENSITIVE
 * "-" for none).
 * METRIC: dm, dmstar, loss, entropy (monotone), nm-entropy, ebil (entropy-based information loss), ambiguity.
 * With algorithm=NAME:MILLIS before the models (NAME lightning, top-down or genetic), ARX's best-effort algorithm of
 * that name runs with that time limit instead of its optimal one (Flash).
 * The data is loaded once; each of the REPEATS anonymize()
 * calls is timed on its own. Prints LOAD and RUN lines as bench_arx.py's ARX driver does.
 */
public class ArxModels {

    public static void main(String[] args) throws Exception {
        if (args.length < 9) {
            System.err.println("usage: ArxModels CSV DELIM HIERARCHY_PATTERN QIS SENSITIVE SUPPRESSION METRIC REPEATS MODEL...");
            System.exit(2);
        }
        long jvmStart = java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime();
        char delim = args[1].equals("tab") ? '\t' : args[1].charAt(0);
        String[] qis = args[3].split(",");
        String sensitive = args[4];
        double suppression = Double.parseDouble(args[5]);
        int repeats = Integer.parseInt(args[7]);
        List<String> models = Arrays.asList(args).subList(8, args.length);
        String subsetFile = null;
        ARXConfiguration.AnonymizationAlgorithm algorithm = ARXConfiguration.AnonymizationAlgorithm.OPTIMAL;
        int timeLimit = 0;
        if (models.get(0).startsWith("algorithm=")) {
            String[] part = models.get(0).substring("algorithm=".length()).split(":");
            algorithm = algorithm(part[0]);
            timeLimit = Integer.parseInt(part[1]);
            models = models.subList(1, models.size());
        }
        if (models.get(0).startsWith("subset=")) {
            subsetFile = models.get(0).substring("subset=".length());
            models = models.subList(1, models.size());
        }

        long started = System.nanoTime();
        String[] header = ArxCsv.header(args[0], delim);
        Data data = ArxCsv.load(args[0], delim, args[2], Arrays.asList(qis), sensitive);
        DataSubset subset = null;
        if (subsetFile != null) {
            subset = DataSubset.create(data, Data.create(ArxCsv.source(subsetFile, delim, header)));
        }
        System.out.printf("LOAD rows=%d columns=%d qis=%d load_ms=%d jvm_to_loaded_ms=%d%n", data.getHandle().getNumRows(),
                          header.length, qis.length, (System.nanoTime() - started) / 1_000_000,
                          System.currentTimeMillis() - jvmStart);

        for (int run = 1; run <= repeats; run++) {
            ARXConfiguration config = ARXConfiguration.create();
            for (String model : models) {
                config.addPrivacyModel(criterion(model, sensitive, subset));
                if (model.startsWith("profitability")) {  // its terms: COST:GAIN:LOSS:BENEFIT, as duckanon's CLI
                    String[] term = model.split(":");
                    config.setCostBenefitConfiguration(ARXCostBenefitConfiguration.create()
                        .setAdversaryCost(Double.parseDouble(term[1])).setAdversaryGain(Double.parseDouble(term[2]))
                        .setPublisherLoss(Double.parseDouble(term[3])).setPublisherBenefit(Double.parseDouble(term[4])));
                }
            }
            config.setSuppressionLimit(suppression);
            config.setQualityModel(metric(args[6]));
            if (algorithm != ARXConfiguration.AnonymizationAlgorithm.OPTIMAL) {
                config.setAlgorithm(algorithm);
                config.setHeuristicSearchTimeLimit(timeLimit);
            }
            long begin = System.nanoTime();
            ARXResult result = new ARXAnonymizer().anonymize(data, config);
            long ms = (System.nanoTime() - begin) / 1_000_000;
            long after = System.currentTimeMillis();
            ARXNode optimum = result.getGlobalOptimum();
            StringBuilder levels = new StringBuilder("{");
            String loss = "none";
            int suppressed = -1;
            if (optimum != null) {
                for (int i = 0; i < qis.length; i++) {
                    levels.append(i == 0 ? "" : ", ").append(qis[i]).append('=').append(optimum.getGeneralization(qis[i]));
                }
                loss = String.valueOf(optimum.getHighestScore());
                DataHandle output = result.getOutput(false);
                suppressed = 0;
                for (int row = 0; row < output.getNumRows(); row++) {
                    // With a research subset ARX marks the records outside it too: count the subset's alone.
                    if (output.isOutlier(row) && (subset == null || subset.getSet().contains(row))) {
                        suppressed++;
                    }
                }
                output.release();
            }
            levels.append('}');
            long checked = result.getProcessStatistics().getTransformationsChecked();
            System.out.printf("RUN %d anonymize_ms=%d epoch_ms_after=%d optimum=%s il=%s il_low=- suppressed=%d checked=%d%n",
                              run, ms, after, levels, loss, suppressed, checked);
            data.getHandle().release();
        }
    }

    static PrivacyCriterion criterion(String model, String sensitive, DataSubset subset) {
        String[] part = model.split(":");
        switch (part[0]) {
        case "k": return new KAnonymity(Integer.parseInt(part[1]));
        case "basic-beta": return new BasicBLikeness(sensitive, Double.parseDouble(part[1]));
        case "enhanced-beta": return new EnhancedBLikeness(sensitive, Double.parseDouble(part[1]));
        case "delta-disclosure": return new DDisclosurePrivacy(sensitive, Double.parseDouble(part[1]));
        case "entropy-l":
            return new EntropyLDiversity(sensitive, Double.parseDouble(part[1]),
                                         part.length > 2 && part[2].equals("grassberger")
                                             ? EntropyLDiversity.EntropyEstimator.GRASSBERGER
                                             : EntropyLDiversity.EntropyEstimator.SHANNON);
        case "recursive-cl": return new RecursiveCLDiversity(sensitive, Double.parseDouble(part[1]), Integer.parseInt(part[2]));
        case "t-equal": return new EqualDistanceTCloseness(sensitive, Double.parseDouble(part[1]));
        case "delta-presence": return new DPresence(Double.parseDouble(part[1]), Double.parseDouble(part[2]), subset);
        case "k-map": return new KMap(Integer.parseInt(part[1]), subset);
        case "average-risk": return new AverageReidentificationRisk(Double.parseDouble(part[1]));
        case "sample-uniqueness": return new SampleUniqueness(Double.parseDouble(part[1]));
        case "profitability": return new ProfitabilityProsecutor();
        case "profitability-journalist": return new ProfitabilityJournalist(subset);
        case "population-uniqueness":  // as ARX's TestAnonymizationRiskBased: the USA, deterministic starts
            return new PopulationUniqueness(Double.parseDouble(part[1]),
                                            PopulationUniquenessModel.valueOf(part[2].toUpperCase()),
                                            ARXPopulationModel.create(ARXPopulationModel.Region.USA),
                                            ARXSolverConfiguration.create().setDeterministic(true)
                                                                  .iterationsPerTry(Integer.parseInt(part[3])));
        default: throw new IllegalArgumentException("unknown model " + model);
        }
    }

    static ARXConfiguration.AnonymizationAlgorithm algorithm(String name) {
        switch (name) {
        case "lightning": return ARXConfiguration.AnonymizationAlgorithm.BEST_EFFORT_BOTTOM_UP;
        case "top-down": return ARXConfiguration.AnonymizationAlgorithm.BEST_EFFORT_TOP_DOWN;
        case "genetic": return ARXConfiguration.AnonymizationAlgorithm.BEST_EFFORT_GENETIC;
        default: throw new IllegalArgumentException("unknown algorithm " + name);
        }
    }

    static Metric<?> metric(String name) {
        switch (name) {
        case "dm": return Metric.createDiscernabilityMetric(false);
        case "dmstar": return Metric.createDiscernabilityMetric(true);
        case "loss": return Metric.createLossMetric();
        case "entropy": return Metric.createEntropyMetric(true);
        case "nm-entropy": return Metric.createEntropyMetric(false);
        case "ebil": return Metric.createEntropyBasedInformationLossMetric();
        case "ambiguity": return Metric.createAmbiguityMetric();
        default: throw new IllegalArgumentException("unknown metric " + name);
        }
    }
}
